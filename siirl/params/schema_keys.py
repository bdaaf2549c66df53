"""The dotted keys the typed schema defines, read from the dataclasses themselves.

The override check needs them before Hydra composes anything (Hydra stops at the first unknown key), and
reading them from ``SiirlConfig`` keeps one source of truth as sections gain fields.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Iterator
from functools import cache
from typing import Any


@dataclasses.dataclass(frozen=True)
class SchemaKeys:
    """``leaves``: every settable dotted key; ``sections``: dataclass-valued keys (settable as a whole);
    ``open_prefixes``: dict-valued keys, under which any sub-key is the user's own; ``not_nullable``: leaves
    whose type does not admit null."""

    leaves: frozenset[str]
    sections: frozenset[str]
    open_prefixes: frozenset[str]
    not_nullable: frozenset[str] = frozenset()

    def knows(self, key: str) -> bool:
        if key in self.leaves or key in self.sections:
            return True
        return any(key.startswith(prefix + ".") for prefix in self.open_prefixes)


def _dataclass_of(hint: Any) -> type | None:
    """The dataclass behind ``hint`` (``Optional[X]`` included), or None."""
    if dataclasses.is_dataclass(hint):
        return hint
    for arg in typing.get_args(hint):
        if dataclasses.is_dataclass(arg):
            return arg
    return None


def _is_mapping(hint: Any) -> bool:
    origin = typing.get_origin(hint)
    if origin in (dict, typing.Dict):  # noqa: UP006 - both spellings occur in the schema
        return True
    return any(_is_mapping(arg) for arg in typing.get_args(hint) if arg is not type(None))


def _admits_none(hint: Any) -> bool:
    return hint is Any or type(None) in typing.get_args(hint)


def _fields(cls: type, prefix: str = "") -> Iterator[tuple[str, Any, bool]]:
    """``(dotted key, type hint, is a section)`` of every field under ``cls``, nested sections walked."""
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        key, hint = f"{prefix}{f.name}", hints[f.name]
        nested = None if _is_mapping(hint) else _dataclass_of(hint)  # a dict of sections is open by name
        yield key, hint, nested is not None
        if nested is not None:
            yield from _fields(nested, key + ".")


@cache
def schema_keys(root: type) -> SchemaKeys:
    fields = list(_fields(root))
    leaves = [(key, hint) for key, hint, section in fields if not section]
    return SchemaKeys(
        leaves=frozenset(key for key, _ in leaves),
        sections=frozenset(key for key, _, section in fields if section),
        open_prefixes=frozenset(key for key, hint in leaves if _is_mapping(hint)),
        not_nullable=frozenset(key for key, hint in leaves if not _admits_none(hint)),
    )
