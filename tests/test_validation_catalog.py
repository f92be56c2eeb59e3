"""docs/validation.md lists every rule the program checks, by kind, and only those: its ids are the catalog's
(components/validation_catalog.py), which maps each id to the code that enforces it."""

from __future__ import annotations

import re

from components.validation_catalog import RULES_BY_KIND
from offline.runner import ROOT_DIR

DOC = (ROOT_DIR / "docs" / "validation.md").read_text(encoding="utf-8")
KIND = re.compile(r"^### (?P<kind>[a-z ]+)\n(?P<body>.*?)(?=^### |\Z)", re.MULTILINE | re.DOTALL)
LISTED = re.compile(r"^- (?P<ids>(?:`[A-Za-z0-9-]+`(?:, |,\n  | and |: ))+)", re.MULTILINE)


def listed_ids() -> dict[str, list[str]]:
    """Per kind, the ids its bullet points open with (before the colon that starts their description)."""
    section = DOC.split("## The rules, by kind", 1)[1]
    found: dict[str, list[str]] = {}
    for match in KIND.finditer(section):
        ids: list[str] = []
        for item in re.split(r"^- ", match["body"], flags=re.MULTILINE)[1:]:
            head = item.split(": ", 1)[0] if ": " in item.split("\n\n")[0] else item.split("\n\n")[0]
            ids += re.findall(r"`([A-Za-z0-9-]+)`", head)
        found[match["kind"]] = ids
    return found


def test_every_kind_the_code_knows_is_a_section_of_the_doc_in_the_same_order() -> None:
    assert list(listed_ids()) == list(RULES_BY_KIND)


def test_each_kind_lists_exactly_the_rules_the_code_enforces() -> None:
    listed = listed_ids()

    assert {kind: sorted(ids) for kind, ids in listed.items()} == {
        kind: sorted(rules) for kind, rules in RULES_BY_KIND.items()
    }


def test_no_rule_is_listed_twice() -> None:
    every = [rule_id for ids in listed_ids().values() for rule_id in ids]

    assert len(every) == len(set(every))


def test_every_rule_id_maps_to_code() -> None:
    assert all(callable(code) or isinstance(code, type) for rules in RULES_BY_KIND.values() for code in rules.values())
