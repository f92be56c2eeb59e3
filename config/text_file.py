"""Reading a user's text file (a stack file, a secrets file, a saved answer): UTF-8 or one line saying what it is.

A file saved by an editor in the system's legacy code page (Windows-1252 on a German or French Windows, Latin-1)
or as "Unicode" (UTF-16, Notepad's old default) ended in a Python traceback from the decoder. The Pulumi CLI
reads YAML as UTF-8 too, so the fix is always the same: save it as UTF-8; the message says which encoding the
bytes look like, for the `iconv -f` that converts it.
"""

from __future__ import annotations

from pathlib import Path


class NotUtf8Error(Exception):
    """The file is not UTF-8; str(error) is one line without the file's name (the caller names it as it is known)."""


def encoding_guess(data: bytes) -> tuple[str, str]:
    """(what the bytes look like, its name for `iconv -f`). A guess from the bytes' shape, never a decoder's word."""
    if data.startswith((b"\xff\xfe\x00\x00", b"\x00\x00\xfe\xff")):
        return "UTF-32", "UTF-32"
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        return "UTF-16 (what Windows editors call 'Unicode')", "UTF-16"
    # ASCII text in UTF-16 without a byte-order mark: every other byte is zero.
    if data and data.count(0) * 3 >= len(data):
        return "UTF-16 without a byte-order mark", "UTF-16LE" if data[1:2] == b"\x00" else "UTF-16BE"
    try:
        data.decode("cp1252")
    except UnicodeDecodeError:
        return "Latin-1 (ISO-8859-1) or another 8-bit code page", "LATIN1"
    return "Windows-1252 / Latin-1 (a Western European code page)", "WINDOWS-1252"


def not_utf8(data: bytes, error: UnicodeDecodeError) -> str:
    before = data[: error.start]
    line = before.count(b"\n") + 1
    column = error.start - (before.rfind(b"\n") + 1) + 1
    looks, iconv = encoding_guess(data)
    return (
        f"not UTF-8 (byte 0x{data[error.start]:02x} at line {line}, column {column}); it looks like {looks}: save "
        f"it as UTF-8, e.g. iconv -f {iconv} -t UTF-8 FILE > FILE.utf8"
    )


def read_utf8(path: Path) -> str:
    """The file's text. OSError as Path.read_text raises it; NotUtf8Error for bytes that are not UTF-8."""
    data = path.read_bytes()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise NotUtf8Error(not_utf8(data, error)) from None
