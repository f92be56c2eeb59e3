"""A file a user hands the tool that is not UTF-8 (a stack file, the secrets file, a saved answer) is refused in
one line naming the file and the encoding its bytes look like, never with a decoder's traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from config.text_file import NotUtf8Error, encoding_guess, read_utf8
from offline.diff import DiffError, read_nodes
from tests.day2.cli_helpers import run

ROOT = Path(__file__).resolve().parents[2]
STACK_TEXT = 'config:\n  gpu-pool:rke2:\n    version: "v1.33.5+rke2r1"\n  # lab de la salle café, étage 2\n'


def _preview(stack_dir: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "offline.preview", "--stack", "lab", "--stack-dir", str(stack_dir), "--quiet"],
        cwd=ROOT, capture_output=True, text=True, check=False, timeout=120, env=env,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("encoding", "looks"),
    [
        ("cp1252", "Windows-1252 / Latin-1 (a Western European code page)"),
        ("utf-16", "UTF-16 (what Windows editors call 'Unicode')"),
    ],
)
def test_a_stack_file_saved_in_another_encoding_is_one_line_naming_the_file_and_the_encoding(
    tmp_path: Path, encoding: str, looks: str
) -> None:
    (tmp_path / "Pulumi.lab.yaml").write_bytes(STACK_TEXT.encode(encoding))

    done = _preview(tmp_path)

    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    [line] = done.stderr.strip().splitlines()
    assert line.startswith("error: Pulumi.lab.yaml: not UTF-8 (byte 0x")
    assert f"it looks like {looks}: save it as UTF-8" in line


def test_a_secrets_file_in_latin_1_is_one_line_naming_the_file_and_never_its_content(tmp_path: Path) -> None:
    secrets = tmp_path / "lab.env"
    secrets.write_bytes("GPU_POOL_SECRET_PROXMOXROOTPASSWORD=mot-de-passe-été\n".encode("latin-1"))
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "GPU_POOL_SECRETS_FILE": str(secrets)}

    done = _preview(tmp_path, env)

    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert f"GPU_POOL_SECRETS_FILE={secrets}: not UTF-8 (byte 0xe9 at line 1, column 50)" in done.stderr
    assert "mot-de-passe" not in done.stderr


def test_a_saved_answer_not_in_utf8_is_refused_by_make_diff_discover_and_claims(tmp_path: Path) -> None:
    saved = tmp_path / "answer.json"
    saved.write_bytes('{"note": "réseau"}'.encode("cp1252"))

    with pytest.raises(DiffError, match=r"NODES: .*answer.json: not UTF-8 .* Windows-1252"):
        read_nodes(saved)
    discovered = run("discover", "--from", str(saved), "--node", "pve-a")
    claims = run("claims", "--from", str(saved))

    assert discovered.code == 2 and "--from" in discovered.err and "not UTF-8" in discovered.err
    assert claims.code == 2 and "not UTF-8" in claims.err and "Windows-1252" in claims.err
    assert "Traceback" not in discovered.err + claims.err


# Every Latin-1 letter with a mark (À..ÿ), alone and after ASCII text, in the code page a Western Windows saves.
ACCENTED = [chr(c) for c in range(0xC0, 0x100)]


@pytest.mark.parametrize("letter", ACCENTED)
def test_text_with_an_accent_saved_in_a_western_code_page_is_named_so(letter: str, tmp_path: Path) -> None:
    for text in (letter, f"name: lab {letter}\n", f"{letter}{letter} # {letter}"):
        saved = tmp_path / "file.yaml"
        saved.write_bytes(text.encode("cp1252"))

        with pytest.raises(NotUtf8Error, match="it looks like Windows-1252 / Latin-1"):
            read_utf8(saved)


@pytest.mark.parametrize("text", ["config:\n", "gpu-pool:rke2:\n  version: v1.33.5+rke2r1\n", "ab"])
def test_ascii_text_saved_as_utf16_without_a_mark_is_named_so(text: str) -> None:
    assert encoding_guess(text.encode("utf-16-le"))[1] == "UTF-16LE"
    assert encoding_guess(text.encode("utf-16-be"))[1] == "UTF-16BE"
    assert encoding_guess(text.encode("utf-16"))[1] == "UTF-16"


def test_utf8_text_is_read_as_it_is(tmp_path: Path) -> None:
    saved = tmp_path / "Pulumi.lab.yaml"
    saved.write_text(STACK_TEXT, encoding="utf-8")

    assert read_utf8(saved) == STACK_TEXT
