"""Every key of verl's own YAML tree has a status: a siiRL key, renamed, inert (verl's default accepted, any
other value refused in one line) or not read; none shadows a siiRL key, and the migration guide names each."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from siirl.errors import ConfigError
from siirl.params.override_screen import screen_overrides
from siirl.params.root import SiirlConfig
from siirl.params.schema_keys import schema_keys
from siirl.params.verl_inert_keys import INERT, NOT_READ, RENAMED, inert_refusal, is_inert, is_not_read
from siirl.params.verl_tree_keys import TREE_INERT

REPO = Path(__file__).resolve().parents[2]
VERL_TREE = REPO / "tests" / "fixtures" / "verl_config" / "_generated_ppo_trainer.yaml"
GUIDE = REPO / "docs" / "migrating-from-verl.md"
SCHEMA = schema_keys(SiirlConfig)


def _leaves(node, prefix=""):
    if isinstance(node, dict) and node:
        return [leaf for key, value in node.items() if key != "_target_" for leaf in _leaves(value, f"{prefix}{key}.")]
    return [prefix[:-1]]


def _verl_keys() -> list[str]:
    return _leaves(OmegaConf.to_container(OmegaConf.load(VERL_TREE), resolve=False))


def _documented(key: str, text: str) -> bool:
    """The guide names the key itself, or a ``prefix.*`` family holding it, in backticks."""
    prose = re.sub(r"```.*?```", "", text, flags=re.DOTALL)  # code blocks' fences would pair backticks wrongly
    spans = set(re.findall(r"`([^`]+)`", prose))
    parts = key.split(".")
    return key in spans or any(".".join(parts[:cut]) + ".*" in spans for cut in range(1, len(parts)))


def test_every_key_of_verls_tree_has_a_status_and_a_row():
    text = GUIDE.read_text(encoding="utf-8")
    missing = [
        key for key in _verl_keys()
        if not SCHEMA.knows(key) and not (key in RENAMED or is_inert(key) or is_not_read(key))
    ]
    assert not missing, missing
    undocumented = [key for key in _verl_keys() if not SCHEMA.knows(key) and not _documented(key, text)]
    assert not undocumented, undocumented


def test_no_status_entry_shadows_a_siirl_key():
    """A ``prefix.*`` family may span a key siiRL implements (``rollout.agent.*`` and MARFT's
    ``agent.rewards_with_env``): the screen reads a schema key before any family, so only exact entries count."""
    exact = set(RENAMED) | set(INERT) | set(NOT_READ)
    shadowed = [key for key in SCHEMA.leaves | SCHEMA.sections if key in exact]
    assert not shadowed, shadowed
    family_only = [key for key in SCHEMA.leaves if (is_inert(key) or is_not_read(key)) and key not in exact]
    for key in family_only:  # passed through to the schema, whatever the value
        assert screen_overrides([f"{key}=true"], SCHEMA, ()) == [f"{key}=true"], key
    for table in (INERT, NOT_READ, RENAMED):
        assert not [entry for entry in table if entry.removesuffix(".*") in SCHEMA.leaves], table


def _other_value(off):
    if isinstance(off, bool):
        return not off
    if off is None:
        return "x"
    if isinstance(off, (int, float)):
        return off + 1
    if isinstance(off, str):
        return off + "_x"
    return [*off, "x"] if isinstance(off, list) else {**off, "x": 1}


@pytest.mark.parametrize("key", sorted(k for k, entry in TREE_INERT.items() if entry.off and not k.endswith("*")))
def test_verls_default_is_accepted_and_another_value_refused(key):
    off = TREE_INERT[key].off[0]
    assert inert_refusal(key, off) is None
    refusal = inert_refusal(key, _other_value(off))
    assert refusal is not None and "\n" not in refusal and refusal.startswith(f"{key}=")


def test_a_disabled_sections_options_are_accepted_its_switch_refused_on():
    kept = screen_overrides(
        ["actor_rollout_ref.ref.profiler.enable=False", "actor_rollout_ref.ref.profiler.tool=nsys",
         "reward_model.profiler.ranks=[0,1]", "actor_rollout_ref.actor.router_replay.record_file=/tmp/r"],
        SCHEMA, (),
    )
    assert kept == []
    with pytest.raises(ConfigError, match="per-role profiling is not implemented") as info:
        screen_overrides(["actor_rollout_ref.rollout.profiler.enable=True"], SCHEMA, ())
    assert "\n" not in str(info.value)


def test_agent_loop_options_of_verls_tree_pass_and_the_rest_stay_refused():
    assert screen_overrides(["actor_rollout_ref.rollout.agent.num_workers=4"], SCHEMA, ()) == []
    with pytest.raises(ConfigError, match="verl's agent loop is not implemented"):
        screen_overrides(["actor_rollout_ref.rollout.agent.some_option=1"], SCHEMA, ())


def test_warmup_style_renames_to_the_scheduler():
    assert screen_overrides(["critic.optim.warmup_style=cosine"], SCHEMA, ()) == ["critic.optim.lr_scheduler_type=cosine"]
    assert screen_overrides(["actor_rollout_ref.actor.optim.warmup_style=null"], SCHEMA, ()) == []
    with pytest.raises(ConfigError, match="warmup_style='linear': expected one of"):
        screen_overrides(["actor_rollout_ref.actor.optim.warmup_style=linear"], SCHEMA, ())
