"""The payloads are packed from what their code imports when it loads, found in the source: no hand-kept list."""

from __future__ import annotations

import io
import subprocess
import sys
import zipfile
from pathlib import Path

from components.shared.payload import module_closure, pack


def write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")


PROJECT = {
    "day2/__init__.py": '"""day2."""\n',
    "day2/entry.py": (
        "from typing import TYPE_CHECKING\n"
        "from day2 import helper\n"
        "from knowledge.facts import ANSWER\n"
        "if TYPE_CHECKING:\n    from config.models import Model\n"
        "try:\n    from day2.optional import X\nexcept ImportError:\n    X = None\n"
        "def validated():\n    from config.models import Model  # where the project is installed\n"
        "def main():\n    print(helper.twice(ANSWER)); return 0\n"
    ),
    "day2/helper.py": "def twice(x):\n    return 2 * x\n",
    "day2/optional.py": "X = 1\n",
    "day2/unused.py": "Y = 2\n",
    "knowledge/__init__.py": '"""knowledge."""\n',
    # As knowledge/gpu_cards.py reads its table: through importlib.resources, which reads inside a zip too.
    "knowledge/facts.py": (
        "import json\nfrom importlib import resources\n"
        'ANSWER = json.loads(resources.files("knowledge").joinpath("data").joinpath("a.json").read_text())\n'
    ),
    "knowledge/data/a.json": "21\n",
    "config/__init__.py": '"""config: runs code on import."""\nimport config.models\n',
    "config/models.py": "import pydantic\n",
}


def test_the_closure_follows_load_time_imports_and_named_data_files_only(tmp_path: Path) -> None:
    write(tmp_path, PROJECT)

    files = module_closure(["day2.entry"], tmp_path)

    assert sorted(files) == [
        "day2/__init__.py",
        "day2/entry.py",
        "day2/helper.py",
        "day2/optional.py",
        "knowledge/__init__.py",
        "knowledge/data/a.json",
        "knowledge/facts.py",
    ]


def test_a_package_init_that_runs_code_is_packed_as_its_docstring_without_its_imports(tmp_path: Path) -> None:
    write(tmp_path, {**PROJECT, "day2/entry.py": "import config.models\n"})

    files = module_closure(["day2.entry"], tmp_path)

    assert files["config/__init__.py"] == b'"""config: runs code on import."""\n'
    assert "config/models.py" in files  # imported by name, so packed


def test_the_packed_zip_runs_with_every_site_package_hidden(tmp_path: Path) -> None:
    write(tmp_path, PROJECT)
    code = pack("day2.entry", root=tmp_path)
    (tmp_path / "app.pyz").write_bytes(code)

    done = subprocess.run(
        [sys.executable, "-S", "-E", "-s", str(tmp_path / "app.pyz")], capture_output=True, text=True, check=False
    )

    assert (done.returncode, done.stdout) == (0, "42\n"), done.stderr
    assert pack("day2.entry", root=tmp_path) == code
    assert "__main__.py" in zipfile.ZipFile(io.BytesIO(code)).namelist()
