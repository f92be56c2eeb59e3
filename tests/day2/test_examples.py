"""The example dumps under examples/day2/ are what the scenario builders produce now (regenerate with
`python -m tests.day2.write_examples`), and the tool gives the answers the docs describe on them."""

from __future__ import annotations

import json

import pytest

from tests.day2.cli_helpers import run
from tests.day2.k8s_objects import NOW_TEXT
from tests.day2.scenarios import EXAMPLES, NODES
from tests.day2.write_examples import example_path, example_text


@pytest.mark.parametrize("scenario", EXAMPLES)
def test_the_committed_example_is_what_the_builder_writes_now(scenario: str) -> None:
    path = example_path(scenario)

    assert path.is_file(), f"{path} is missing: run python -m tests.day2.write_examples"
    assert path.read_text(encoding="utf-8") == example_text(scenario), (
        f"{path.name} differs from its builder: run python -m tests.day2.write_examples"
    )


def test_every_example_is_a_kubectl_list_of_the_four_kinds() -> None:
    for scenario in EXAMPLES:
        document = json.loads(example_path(scenario).read_text(encoding="utf-8"))
        assert (document["apiVersion"], document["kind"]) == ("v1", "List")
        assert {item["kind"] for item in document["items"]} == {"Node", "Pod", "ConfigMap", "Job"}


def test_on_the_notebooks_example_no_card_is_free_while_the_stopped_notebook_terminates() -> None:
    result = run("claims", "--from", str(example_path("notebooks")), "--now", NOW_TEXT, "-o", "json")

    assert result.json()["total"]["free"] == 0
    assert [h["pod"] for h in result.json()["holders"] if h["terminating"]] == ["llm-scratch-0"]


def test_on_the_broken_driver_example_doctor_names_the_driver_of_dc2_and_exits_1() -> None:
    result = run("doctor", "--from", str(example_path("broken-driver")), "-o", "json")

    assert result.code == 1
    assert {d["node"]: d["firstBroken"] for d in result.json()} == {
        NODES["dc1"]: None,
        NODES["dc2"]: "driver",
        NODES["dc3"]: None,
    }
