"""The one way the program runs a command at preview time (pulumi-command's `local.run` invoke).

pulumi-command logs an invoke's stdout and stderr into the engine's output unless told not to (`logging`
"Defaults to logging both stdout and stderr", pulumi-command 1.2.1 schema). The preflights read whole
`kubectl get -o json` answers and SSH host checks: under the real engine every preview printed them, hundreds of
lines, in the user's terminal. The program parses the output itself and reports what matters.
"""

from __future__ import annotations

import pulumi_command as command


def run_quietly(script: str) -> command.local.RunResult:
    return command.local.run(command=script, logging=command.local.Logging.NONE)
