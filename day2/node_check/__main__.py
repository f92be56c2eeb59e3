"""`python3 -m day2.node_check`: node-check from a copy of day2/ and knowledge/ on the node."""

import sys

from day2.node_check.command import main

sys.exit(main())
