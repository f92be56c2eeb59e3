"""Kubernetes resource quantities ("4Gi", "500m"): the API's grammar and their value, standard library only (the
stack config validates with it, and the in-cluster payloads count requests with it)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from decimal import Decimal
from typing import Final

# Kubernetes resource.Quantity, unsigned (the ClusterPolicy CRD's pattern without the sign).
QUANTITY = re.compile(
    r"^(?P<number>[0-9]+(?:\.[0-9]*)?|\.[0-9]+)"
    r"(?P<suffix>[KMGTPE]i|[numkMGTPE]|[eE][+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))?$"
)
_BINARY_SUFFIX: Final[Mapping[str, int]] = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}
_DECIMAL_SUFFIX: Final[Mapping[str, int]] = {
    "n": -9,
    "u": -6,
    "m": -3,
    "": 0,
    "k": 3,
    "M": 6,
    "G": 9,
    "T": 12,
    "P": 15,
    "E": 18,
}


def parse_quantity(text: str) -> Decimal:
    """The numeric value of a Kubernetes quantity ("4Gi" -> 4294967296, "500m" -> 0.5)."""
    match = QUANTITY.match(text)
    if match is None:
        raise ValueError(f"'{text}' is not a Kubernetes quantity")
    number = Decimal(match["number"])
    suffix = match["suffix"] or ""
    if suffix in _BINARY_SUFFIX:
        return number * (Decimal(1024) ** _BINARY_SUFFIX[suffix])
    if suffix in _DECIMAL_SUFFIX:
        return number.scaleb(_DECIMAL_SUFFIX[suffix])
    return number.scaleb(int(Decimal(suffix[1:])))
