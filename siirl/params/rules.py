"""Rules beside their fields: each config section checks its own values.

A field's range or choice is its metadata (``checked``); an option the schema accepts for verl's scripts but
siiRL does not implement is refused when set (``refused``); checks across a section's fields, or against
other sections, are the section's ``validate(cfg, key)`` method. ``validate_sections`` walks the composed
config once, section by section, and raises the first ``ConfigError``. It runs on the composed OmegaConf
node, which a section's ``validate`` reads attribute by attribute as it would the dataclass.
"""

from __future__ import annotations

import dataclasses
import math
import typing
from collections.abc import Callable
from functools import cache
from typing import Any

from siirl.errors import ConfigError

#: (is the value allowed?, what is allowed, as the refusal names it)
Rule = tuple[Callable[[Any], bool], str]

POSITIVE: Rule = (lambda v: v > 0, "> 0")
NON_NEGATIVE: Rule = (lambda v: v >= 0, ">= 0")
PROBABILITY: Rule = (lambda v: 0.0 < v <= 1.0, "in (0, 1]")
UNIT_INTERVAL: Rule = (lambda v: 0.0 <= v <= 1.0, "in [0, 1]")
FINITE_POSITIVE: Rule = (lambda v: 0 < v < math.inf, "finite and > 0")
FINITE_NON_NEGATIVE: Rule = (lambda v: 0 <= v < math.inf, "finite and >= 0")
TOP_K: Rule = (lambda v: v >= -1, ">= -1 (-1 or 0: no top-k filtering)")


def or_null(rule: Rule, allowed: str) -> Rule:
    """``rule``, with null (not set) allowed too; ``allowed`` words both as the key's refusal reads."""
    return (lambda v: v is None or rule[0](v)), allowed


#: One check, worded as each family's refusals have always read: an engine knob, a micro-batch size that may be
#: left unset, an option of verl's optional algorithm sections.
NULL_OR_POSITIVE = or_null(POSITIVE, "> 0 (or null)")
UNSET_OR_POSITIVE = or_null(POSITIVE, "> 0")
OPTIONAL_POSITIVE = or_null(POSITIVE, "null or > 0")


def is_megatron(strategy: Any) -> bool:
    """verl's Megatron-LM training strategy, which siiRL does not implement."""
    return strategy == "megatron"


#: How a value that breaks its field's rule is refused, after ``bad config: `` (``expected``: the rule's text).
INVALID = "{key}={value!r} is invalid; expected {expected}"
#: The wordings some keys' refusals had before their checks became field rules, kept as they read.
MUST_BE = "{key} must be {expected}, got {value}"
VALUE_MUST_BE = "{key}={value!r} must be {expected}"
IS_NOT = "{key}={value} is not {expected}"


def one_of(*values: str) -> Rule:
    return (lambda v: v in values), f"one of {', '.join(values)}"


def checked(default: Any, rule: Rule, says: str = INVALID) -> Any:
    """A field whose value must pass ``rule``; ``says``: how a value that does not is refused. A list default
    is copied for each instance (as a ``default_factory``)."""
    metadata = {"rule": rule, "says": says}
    if isinstance(default, list):
        return dataclasses.field(default_factory=lambda: list(default), metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


def refused(default: Any, is_set: Callable[[Any], bool], why: str, early: bool = True) -> Any:
    """A field accepted for verl's scripts whose value ``is_set`` asks for what siiRL lacks (``why``); ``early``:
    refused in the overrides and the user's file before composing, ahead of the unknown keys it brings along."""
    refusal = (is_set, why)
    return dataclasses.field(default=default, metadata={"refused": refusal, **({"early": refusal} if early else {})})


@cache
def section_fields(cls: type) -> tuple[tuple[dataclasses.Field, type | None], ...]:
    """Each field of ``cls`` with the section dataclass it holds (None for a leaf, a list or a dict)."""
    hints = typing.get_type_hints(cls)
    return tuple((f, hints[f.name] if dataclasses.is_dataclass(hints[f.name]) else None) for f in dataclasses.fields(cls))


def field_table(cls: type, kind: str, prefix: str = "") -> dict[str, Any]:
    """Dotted key -> the ``kind`` (``rule`` or ``refused``) metadata of every field under ``cls``."""
    table: dict[str, Any] = {}
    for f, section in section_fields(cls):
        if kind in f.metadata:
            table[prefix + f.name] = f.metadata[kind]
        if section is not None:
            table.update(field_table(section, kind, f"{prefix}{f.name}."))
    return table


def check_value(key: str, value: Any, f: dataclasses.Field) -> None:
    if "refused" in f.metadata and f.metadata["refused"][0](value):
        raise ConfigError(f"bad config: {key}={value!r} {f.metadata['refused'][1]}")
    if "rule" in f.metadata and not f.metadata["rule"][0](value):
        says = f.metadata["says"].format(key=key, value=value, expected=f.metadata["rule"][1])
        raise ConfigError(f"bad config: {says}")


def validate_sections(cfg: Any, cls: type, node: Any = None, key: str = "") -> None:
    """Every field's rule, each nested section, then the section's own ``validate(cfg, key)``."""
    node = cfg if node is None else node
    for f, section in section_fields(cls):
        value, dotted = getattr(node, f.name), f"{key}.{f.name}" if key else f.name
        check_value(dotted, value, f)
        if section is not None:
            validate_sections(cfg, section, value, dotted)
    if hasattr(cls, "validate"):
        cls.validate(node, cfg, key)
