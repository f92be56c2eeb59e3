"""Read a stack file as the Pulumi CLI does: YAML 1.2 scalars the way Go's yaml.v3 resolves them, and a key
given twice refused.

PyYAML implements YAML 1.1: `pciAddress: 41:00.0` (as lspci prints it) is the base-60 float 2460.0, `on`/`no`
are booleans, `0x10` an int; and a key given twice silently keeps the last value (a whole `gpu-pool:kyverno`
block can vanish). The CLI reads `Pulumi.<stack>.yaml` with gopkg.in/yaml.v3, whose plain-scalar rules are in
resolve.go (go-yaml/yaml v3.0.1, resolve.go `resolve()` and `resolveMap`): true/false and null only in their
YAML 1.2 spellings, no base-60, Go's `strconv.ParseInt(s, 0, 64)` after removing `_` (so 0x.., 0o.., 0b.. and a
leading-zero octal are ints), then the float pattern `yamlStyleFloat`; and its decoder refuses a duplicate key
("mapping key ... already defined at line N", decode.go `d.mapping`). This module composes with PyYAML (the
syntax is the same) and resolves every plain scalar by those rules instead.
"""

from __future__ import annotations

import functools
import math
import re
from typing import Any

import yaml

# go-yaml v3 resolve.go, resolveMapList.
_FIXED: dict[str, Any] = {
    **dict.fromkeys(("true", "True", "TRUE"), True),
    **dict.fromkeys(("false", "False", "FALSE"), False),
    **dict.fromkeys(("", "~", "null", "Null", "NULL"), None),
    **dict.fromkeys((".nan", ".NaN", ".NAN"), math.nan),
    **dict.fromkeys((".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF"), math.inf),
    **dict.fromkeys(("-.inf", "-.Inf", "-.INF"), -math.inf),
}
_YAML_STYLE_FLOAT = re.compile(r"^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$")
# resolve.go tries a timestamp first for a plain scalar starting YYYY-; the Pulumi config keeps it as its text.
_TIMESTAMP = re.compile(r"^[0-9]{4}-")
_GO_INT = re.compile(r"^[-+]?(0[xX][0-9a-fA-F]+|0[oO][0-7]+|0[bB][01]+|0[0-7]*|[1-9][0-9]*)$")
_INT64 = 2**63


class DuplicateKeyError(ValueError):
    """A mapping key given twice: the message names the key and both lines."""


def _go_parse_int(text: str) -> int | None:
    """Go's strconv.ParseInt(text, 0, 64) (with ParseUint's wider range for positive values), or None."""
    if not _GO_INT.match(text):
        return None
    sign = -1 if text.startswith("-") else 1
    digits = text.lstrip("+-")
    lowered = digits.lower()
    if lowered.startswith("0x"):
        value = int(digits[2:], 16)
    elif lowered.startswith("0o"):
        value = int(digits[2:], 8)
    elif lowered.startswith("0b"):
        value = int(digits[2:], 2)
    elif len(digits) > 1 and digits.startswith("0"):
        value = int(digits[1:], 8)  # a YAML 1.1 octal, which yaml.v3 still decodes
    else:
        value = int(digits)
    value *= sign
    return value if -_INT64 <= value < 2 * _INT64 else None


def resolve_plain(text: str) -> Any:
    """A plain (unquoted) scalar as yaml.v3 decodes it into an interface{}."""
    if text in _FIXED:
        return _FIXED[text]
    first = text[0]
    if first == ".":
        try:
            return float(text)
        except ValueError:
            return text
    if first in "+-0123456789":
        if _TIMESTAMP.match(text):
            return text
        plain = text.replace("_", "")
        number = _go_parse_int(plain)
        if number is not None:
            return number
        if _YAML_STYLE_FLOAT.match(plain):
            return float(plain)
    return text


class _Composer(yaml.SafeLoader):
    """PyYAML's parser with no implicit (YAML 1.1) resolvers: every plain scalar composes as a str node."""


_Composer.yaml_implicit_resolvers = {}

_STR_TAG = "tag:yaml.org,2002:str"


def _value(node: yaml.Node, where: str) -> Any:
    if isinstance(node, yaml.ScalarNode):
        if node.style is None and node.tag in (_STR_TAG, "!"):
            return resolve_plain(node.value)
        if node.tag == _STR_TAG or node.style is not None:
            return node.value
        return resolve_plain(node.value)
    if isinstance(node, yaml.SequenceNode):
        return [_value(item, where) for item in node.value]
    if isinstance(node, yaml.MappingNode):
        result: dict[Any, Any] = {}
        lines: dict[Any, int] = {}
        merged: list[yaml.Node] = []
        for key_node, value_node in node.value:
            if _is_merge(key_node):
                merged.append(value_node)
                continue
            key = _value(key_node, where)
            line = key_node.start_mark.line + 1
            if key in result:
                raise DuplicateKeyError(
                    f"{where}: key {key!r} is given twice, on line {lines[key]} and on line {line}; the Pulumi CLI "
                    "refuses the file (YAML keys are unique): keep one of them, merging what each holds"
                )
            result[key] = _value(value_node, where)
            lines[key] = line
        for value_node in merged:
            _merge_into(result, value_node, where)
        return result
    raise yaml.YAMLError(f"{where}: unexpected YAML node {node!r}")


def _is_merge(node: yaml.Node) -> bool:
    """A plain `<<` key, which yaml.v3 resolves to the merge tag (resolve.go: `<<` is `!!merge`)."""
    return isinstance(node, yaml.ScalarNode) and node.style is None and node.value == "<<"


def _merge_into(result: dict[Any, Any], value_node: yaml.Node, where: str) -> None:
    """yaml.v3's merge (decode.go `d.merge`): the keys of a mapping, or of each mapping of a sequence in order, that
    the mapping does not set itself; an earlier mapping of the sequence wins over a later one. Anything else is
    the error yaml.v3 gives ("map merge requires map or sequence of maps as the value")."""
    sources = value_node.value if isinstance(value_node, yaml.SequenceNode) else [value_node]
    for source in sources:
        if not isinstance(source, yaml.MappingNode):
            raise yaml.YAMLError(
                f"{where}: line {value_node.start_mark.line + 1}: a merge key `<<` takes a map or a list of maps "
                "(e.g. `<<: *common`), as the Pulumi CLI's YAML does"
            )
        for key, value in _value(source, where).items():
            result.setdefault(key, value)


@functools.lru_cache(maxsize=8)
def _compose(text: str) -> yaml.Node | None:
    """The document's node tree, composed once per text: a preview reads its stack file for the config and again
    for numbers written with a leading zero. Nodes are only read here, never changed; a YAML error is not cached."""
    return yaml.compose(text, Loader=_Composer)


def load_stack_yaml(text: str, where: str) -> Any:
    """The document as the Pulumi CLI decodes it (new containers each call). Raises DuplicateKeyError or
    yaml.YAMLError."""
    node = _compose(text)
    return None if node is None else _value(node, where)


# A plain integer written with a leading zero: yaml.v3 reads 03101 as the octal 1601 (Go's ParseInt with base 0),
# and 0899, which is no octal, as the float 899.0. Nobody writing a VM id or an IOMMU group means either.
_LEADING_ZERO = re.compile(r"^[-+]?0[0-9_]*[0-9][0-9_]*$")

Path_ = tuple[str | int, ...]


def surprising_numbers(text: str) -> list[tuple[Path_, str, Any]]:
    """Every plain scalar of the document the CLI would read as another number than it shows: (its path in the
    document, the text as written, the value the CLI reads). Parse errors are the reader's to report: none here."""
    try:
        root = _compose(text)
    except yaml.YAMLError:
        return []
    found: list[tuple[Path_, str, Any]] = []

    def walk(node: yaml.Node, path: Path_) -> None:
        if isinstance(node, yaml.ScalarNode):
            if node.style is None and _LEADING_ZERO.match(node.value):
                found.append((path, node.value, resolve_plain(node.value)))
        elif isinstance(node, yaml.SequenceNode):
            for index, item in enumerate(node.value):
                walk(item, (*path, index))
        elif isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                walk(value, (*path, str(key.value)))

    if root is not None:
        walk(root, ())
    return found
