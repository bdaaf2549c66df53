"""Check every ``key=value`` override against the schema BEFORE Hydra composes, so a migrating user sees all
the keys siiRL does not know in one error (Hydra stops at the first), each with the closest known key.

verl spellings are handled here too (``siirl.params.verl_inert_keys``): renamed keys are rewritten, keys of
unimplemented features are dropped at their "off" value and refused, with the reason, otherwise. Where two
spellings of one key from different verl generations disagree, the newest wins, with one warning.
"""

from __future__ import annotations

import difflib
import logging
from collections.abc import Iterable
from typing import Any, NamedTuple

import yaml

from siirl.errors import ConfigError
from siirl.params.schema_keys import SchemaKeys
from siirl.params.verl_inert_keys import RENAMED, inert_refusal, is_inert, is_not_read, rename_of, renamed

logger = logging.getLogger(__name__)


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


def parse_value(raw: str) -> Any:
    """The override's value as Hydra reads it (YAML scalars: true/True, 1, "quoted")."""
    try:
        return yaml.safe_load(raw) if raw.strip() else None
    except yaml.YAMLError:
        return raw


#: How an unknown key of verl's own YAML tree is named: verl added it after the status table was written.
NEWER_VERL_KEY = "a verl key newer than this table"


def _unknown(key: str, schema: SchemaKeys, verl_tree: bool = False) -> str:
    guess = closest_key(key, schema.leaves)
    if verl_tree:
        return f"{key}: {NEWER_VERL_KEY} (nearest known key: {guess or 'none'}); set it to verl's default or drop it"
    return f"unknown key {key}" + (f" (did you mean {guess}?)" if guess else "")


class _Screened(NamedTuple):
    keep: str | None
    problem: str | None = None
    #: verl generations the spelling as written is newer than the key kept (see ``Renamed.newer``).
    newer: int = 0


def _screen_one(override: str, schema: SchemaKeys, groups: frozenset[str], verl_tree: bool = False) -> _Screened:
    key, sep, raw = override.partition("=")
    bare = key.lstrip("+~")
    sign = key[: len(key) - len(bare)]
    if not sep or bare in groups or bare.split(".")[0] == "hydra":
        return _Screened(override)
    entry = rename_of(bare)
    if entry is not None and (entry == bare or not schema.knows(bare)):  # a ``prefix.*`` entry: off the schema's keys
        try:
            target = renamed(bare, parse_value(raw))
        except ValueError as exc:
            return _Screened(None, str(exc))
        if target is None:
            return _Screened(None)
        new_key, value = target
        text = raw if value == parse_value(raw) else str(value)
        landed = _screen_one(f"{sign}{new_key}={text}", schema, groups, verl_tree)  # it may land on a status
        problem = landed.problem and landed.problem.replace(new_key, bare, 1)  # named as the user wrote it
        return landed._replace(problem=problem, newer=landed.newer + RENAMED[entry].newer)
    if bare not in schema.leaves and is_inert(bare):  # a key we implement beats its verl family
        return _Screened(None, inert_refusal(bare, parse_value(raw)))
    if is_not_read(bare):
        return _Screened(None)
    if not schema.knows(bare):
        return _Screened(None, _unknown(bare, schema, verl_tree))
    # '+key=' on a key the schema already has would be Hydra's "already at" error: it means "set it"; a
    # sub-key of a dict-valued field (engine_kwargs.vllm.x, override_config.x) is the user's own, added as is.
    under_dict = bare not in schema.leaves and bare not in schema.sections
    return _Screened(f"++{bare}={raw}" if sign == "+" or under_dict else override)


def override_key(override: str) -> str:
    """The dotted key an override sets, without Hydra's ``+`` / ``++`` / ``~`` signs."""
    return override.partition("=")[0].lstrip("+~")


def _newest_wins(overrides: list[str], results: list[_Screened]) -> list[_Screened]:
    """Of the spellings of one key from different verl generations, keep the newest; say so once per key
    when the others set another value (a null is verl's "not set", as its newer trees write the old keys)."""
    by_key: dict[str, list[int]] = {}
    for index, result in enumerate(results):
        if result.keep is not None:
            by_key.setdefault(override_key(result.keep), []).append(index)
    out = list(results)
    for key, indices in by_key.items():
        newest = max(results[i].newer for i in indices)
        winner = next(i for i in indices if results[i].newer == newest)
        losers = [i for i in indices if results[i].newer < newest]
        for i in losers:
            out[i] = _Screened(None)
        value = parse_value(results[winner].keep.partition("=")[2])
        differ = [
            overrides[i] for i in losers if parse_value(results[i].keep.partition("=")[2]) not in (None, value)
        ]
        if differ and value is not None:
            logger.warning("%s: the newer verl key %s wins over %s", key, overrides[winner], ", ".join(differ))
    return out


def screen_each(
    overrides: list[str], schema: SchemaKeys, groups: Iterable[str] = (), verl_tree: bool = False
) -> list[tuple[str | None, str | None]]:
    """Per override: ``(override to compose or None, problem or None)``. ``verl_tree``: the overrides are the
    leaves of verl's own YAML tree, so a key without a status is one verl added later, not a misspelling."""
    group_names = frozenset(groups)
    screened = [_screen_one(override, schema, group_names, verl_tree) for override in overrides]
    results = _newest_wins(overrides, screened)
    return [(result.keep, result.problem) for result in results]


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
