"""The kinds of status a verl key without a siiRL field can have (see ``siirl.params.verl_inert_keys``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

#: A value-map entry meaning "keep no override".
DROP = object()


@dataclass(frozen=True)
class Renamed:
    #: The key it means; for a ``prefix.*`` entry a ``prefix.*`` too (the rest of the key carries over).
    to: str
    #: parsed value -> new value (``DROP``: no override is kept); None = the value as written.
    values: dict[Any, Any] | None = None
    #: verl generations this spelling is newer than ``to`` (verl moved the key here): when spellings of one key
    #: disagree, the newest wins (``siirl.params.override_screen``).
    newer: int = 0


@dataclass(frozen=True)
class Inert:
    #: The values that leave the feature off (parsed as YAML); empty: every value is refused.
    off: tuple[Any, ...]
    why: str

SPEED = "a speed or memory knob; siiRL's log-prob path is not torch.compiled nor chunked, results are the same"
MTP = "multi-token-prediction heads are not implemented (false only)"


def not_wired(feature: str, *off: object) -> Inert:
    """A verl feature siiRL does not implement: accepted only at verl's default values ``off``."""
    return Inert(off, f"{feature} is not implemented; accepted only at verl's default")


#: The prefixes verl's keys are written under, shared by the status tables.
ACTOR, REF, ROLLOUT, MODEL = (f"actor_rollout_ref.{part}." for part in ("actor", "ref", "rollout", "model"))


def each(why: str, *keys: str) -> dict[str, str]:
    """Keys that share one status reason, written once."""
    return dict.fromkeys(keys, why)
