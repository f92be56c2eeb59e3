"""The project's name is written once (config/project.py) and is the name Pulumi.yaml gives the project."""

from __future__ import annotations

import yaml

from config.project import PREFIX, PROJECT, ROOT_DIR


def test_the_project_name_is_the_name_pulumi_yaml_gives_the_project() -> None:
    document = yaml.safe_load((ROOT_DIR / "Pulumi.yaml").read_text(encoding="utf-8"))

    assert document["name"] == PROJECT
    assert f"{document['name']}:" == PREFIX
