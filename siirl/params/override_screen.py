"""Check every ``key=value`` override against the schema BEFORE Hydra composes, so a migrating user sees all
the keys siiRL does not know in one error (Hydra stops at the first), each with the closest known key.

verl spellings are handled here too (``siirl.params.verl_inert_keys``): renamed keys are rewritten, keys of
unimplemented features are dropped at their "off" value and refused, with the reason, otherwise.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from typing import Any

import yaml

from siirl.errors import ConfigError
from siirl.params.schema_keys import SchemaKeys
from siirl.params.verl_inert_keys import RENAMED, inert_refusal, is_inert, is_not_read, renamed


def _leaf(key: str) -> str:
    return key.rsplit(".", 1)[-1]


def _ratio(a: str, b: str) -> float:
    return difflib.SequenceMatcher(None, a, b).ratio()


def closest_key(key: str, known: Iterable[str]) -> str | None:
    """The known key ``key`` most likely meant: one with the same leaf name anywhere in the tree (a key
    written at the wrong depth, e.g. ``ref.param_offload`` for ``ref.fsdp_config.param_offload``), else a
    close leaf in the same section, else a very close leaf anywhere; None rather than a far-fetched guess."""
    known = sorted(known)
    parent, leaf = key.rpartition(".")[0], _leaf(key)
    same_leaf = [k for k in known if _leaf(k) == leaf]
    if same_leaf:
        return max(same_leaf, key=lambda k: _ratio(key, k))
    siblings = {_leaf(k): k for k in known if k.rpartition(".")[0] == parent}
    close = difflib.get_close_matches(leaf, sorted(siblings), n=1, cutoff=0.6)
    if close:
        return siblings[close[0]]
    close = difflib.get_close_matches(leaf, sorted({_leaf(k) for k in known}), n=1, cutoff=0.8)
    if close:
        return max((k for k in known if _leaf(k) == close[0]), key=lambda k: _ratio(key, k))
    return None


def _parse(raw: str) -> Any:
    """The override's value as Hydra reads it (YAML scalars: true/True, 1, "quoted")."""
    try:
        return yaml.safe_load(raw) if raw.strip() else None
    except yaml.YAMLError:
        return raw


def _unknown(key: str, schema: SchemaKeys) -> str:
    guess = closest_key(key, schema.leaves)
    return f"unknown key {key}" + (f" (did you mean {guess}?)" if guess else "")


def _screen_one(override: str, schema: SchemaKeys, groups: frozenset[str]) -> tuple[str | None, str | None]:
    """``(override to keep or None, problem or None)``."""
    key, sep, raw = override.partition("=")
    bare = key.lstrip("+~")
    sign = key[: len(key) - len(bare)]
    if not sep or bare in groups or bare.split(".")[0] == "hydra":
        return override, None
    if bare in RENAMED:
        try:
            target = renamed(bare, _parse(raw))
        except ValueError as exc:
            return None, str(exc)
        if target is None:
            return None, None
        new_key, value = target
        text = raw if value == _parse(raw) else str(value)
        return f"{'++' if sign else ''}{new_key}={text}", None
    if bare not in schema.leaves and is_inert(bare):  # a key we implement beats its verl family
        return None, inert_refusal(bare, _parse(raw))
    if is_not_read(bare):
        return None, None
    if not schema.knows(bare):
        return None, _unknown(bare, schema)
    # '+key=' on a key the schema already has would be Hydra's "already at" error: it means "set it"; a
    # sub-key of a dict-valued field (engine_kwargs.vllm.x, override_config.x) is the user's own, added as is.
    under_dict = bare not in schema.leaves and bare not in schema.sections
    return (f"++{bare}={raw}" if sign == "+" or under_dict else override), None


def screen_each(
    overrides: list[str], schema: SchemaKeys, groups: Iterable[str] = ()
) -> list[tuple[str | None, str | None]]:
    """Per override: ``(override to compose or None, problem or None)``."""
    group_names = frozenset(groups)
    return [_screen_one(override, schema, group_names) for override in overrides]


def raise_problems(problems: list[str], what: str = "overrides") -> None:
    """Every problem at once as one ``ConfigError`` (one line per key when there are several)."""
    if len(problems) == 1:
        raise ConfigError(f"bad config: {problems[0]}")
    if problems:
        listed = "\n".join(f"  {p}" for p in problems)
        raise ConfigError(f"bad config: {len(problems)} {what} cannot be applied:\n{listed}")


def screen_overrides(overrides: list[str], schema: SchemaKeys, groups: Iterable[str]) -> list[str]:
    """The overrides to compose (renamed ones rewritten, inert ones dropped); every problem at once as
    one ``ConfigError`` (one line per key when there are several)."""
    results = screen_each(overrides, schema, groups)
    raise_problems([problem for _, problem in results if problem is not None])
    return [keep for keep, _ in results if keep is not None]
