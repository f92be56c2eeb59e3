"""Write the example dumps under examples/day2/ from the scenario builders.

    .tools/bin/uv run --no-sync python -m tests.day2.write_examples

tests/day2/test_examples.py fails when a committed file differs from what the builders produce now.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tests.day2.k8s_objects import dump
from tests.day2.scenarios import EXAMPLES, SCENARIOS

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES_DIR = ROOT / "examples" / "day2"


def example_text(scenario: str) -> str:
    """The dump as `kubectl get nodes,pods,configmaps,jobs -A -o json` prints it: sorted keys, 4-space indent."""
    return json.dumps(dump(SCENARIOS[scenario]()), indent=4, sort_keys=True) + "\n"


def example_path(scenario: str) -> Path:
    return EXAMPLES_DIR / f"{scenario}.json"


def main() -> int:
    EXAMPLES_DIR.mkdir(parents=True, exist_ok=True)
    for scenario in EXAMPLES:
        example_path(scenario).write_text(example_text(scenario), encoding="utf-8")
        print(example_path(scenario).relative_to(ROOT))
    return 0


if __name__ == "__main__":
    sys.exit(main())
