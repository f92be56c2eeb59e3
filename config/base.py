"""The base of every stack-config model: camelCase keys, unknown keys refused with a suggestion."""

from __future__ import annotations

import difflib
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, model_validator
from pydantic.alias_generators import to_camel
from pydantic_core import PydanticCustomError


def nearest(word: str, choices: list[str]) -> str | None:
    """The closest valid spelling of a mistyped key, if any is close enough."""
    lowered = {choice.lower(): choice for choice in choices}
    if word.lower() in lowered:
        return lowered[word.lower()]
    match = difflib.get_close_matches(word, choices, n=1, cutoff=0.6)
    return match[0] if match else None


class ConfigModel(BaseModel):
    """Stack config is camelCase in Pulumi.<stack>.yaml and snake_case in Python.

    A typo in a key must not be ignored silently (a misspelt `sharing` would leave a card
    unshared without a word), so unknown keys are refused and the nearest valid key suggested.
    """

    model_config: ClassVar[ConfigDict] = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=False,
        frozen=True,
        extra="forbid",
        str_strip_whitespace=True,
    )

    @model_validator(mode="before")
    @classmethod
    def _refuse_unknown_keys(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        valid = [field.alias or name for name, field in cls.model_fields.items()]
        for key in data:
            if key not in valid:
                suggestion = nearest(str(key), valid)
                hint = f"; did you mean '{suggestion}'?" if suggestion else f"; valid keys: {', '.join(valid)}"
                raise PydanticCustomError(
                    "unknown_key",
                    "unknown key '{key}'{hint}",
                    {"key": str(key), "hint": hint},
                )
        return data
