"""Every key of verl's own YAML trees has a status: a siiRL key, renamed, inert (verl's default accepted, any
other value refused in one line) or not read; none shadows a siiRL key, and the migration guide names each.
The trees are verl's at three commits: the one the first migration read (b178a3c, 2025), the one after its
February 2026 reward move, and its current one (August 2026)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from siirl.errors import ConfigError
from siirl.params.override_screen import screen_overrides
from siirl.params.root import SiirlConfig
from siirl.params.schema_keys import schema_keys
from siirl.params.verl_inert_keys import (
    INERT,
    NOT_READ,
    RENAMED,
    inert_refusal,
    is_inert,
    is_not_read,
    rename_of,
)
from siirl.params.verl_tree_keys import TREE, Inert, of_kind

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures"
#: verl's generated (fully expanded) trainer tree at each commit: label -> file.
VERL_TREES = {
    "b178a3c": FIXTURES / "verl_config" / "_generated_ppo_trainer.yaml",
    "018f8dc (2026-02)": FIXTURES / "verl_config_2026_02" / "_generated_ppo_trainer.yaml",
    "1dda039 (2026-08)": FIXTURES / "verl_config_2026_08" / "_generated_ppo_trainer.yaml",
}
GUIDE = REPO / "docs" / "migrating-from-verl.md"
SCHEMA = schema_keys(SiirlConfig)


def _leaves(node, prefix=""):
    if isinstance(node, dict) and node:
        return [leaf for key, value in node.items() if key != "_target_" for leaf in _leaves(value, f"{prefix}{key}.")]
    return [prefix[:-1]]


def _verl_keys(tree: Path) -> list[str]:
    return _leaves(OmegaConf.to_container(OmegaConf.load(tree), resolve=False))


def _documented(key: str, text: str) -> bool:
    """The guide names the key itself, or a ``prefix.*`` family holding it, in backticks."""
    prose = re.sub(r"```.*?```", "", text, flags=re.DOTALL)  # code blocks' fences would pair backticks wrongly
    spans = set(re.findall(r"`([^`]+)`", prose))
    parts = key.split(".")
    return key in spans or any(".".join(parts[:cut]) + ".*" in spans for cut in range(1, len(parts)))


@pytest.mark.parametrize("tree", VERL_TREES.values(), ids=VERL_TREES.keys())
def test_every_key_of_verls_tree_has_a_status_and_a_row(tree):
    text = GUIDE.read_text(encoding="utf-8")
    keys = _verl_keys(tree)
    missing = [
        key for key in keys
        if not SCHEMA.knows(key) and not (rename_of(key) or is_inert(key) or is_not_read(key))
    ]
    assert not missing, missing
    undocumented = [key for key in keys if not SCHEMA.knows(key) and not _documented(key, text)]
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


TREE_INERT = of_kind(TREE, Inert)


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
    with pytest.raises(ConfigError, match="MoE router replay is not implemented") as info:
        screen_overrides(["actor_rollout_ref.actor.router_replay.mode=R3"], SCHEMA, ())
    assert "\n" not in str(info.value)


def test_a_roles_profiler_switch_is_accepted_since_the_torch_profiler_traces_every_role():
    """verl's torch profile script turns on the actor's and the rollout's profilers beside global_profiler.tool;
    the step profiler (siirl.dag_worker.step_profiler) traces the whole step on every rank."""
    assert screen_overrides(["actor_rollout_ref.rollout.profiler.enable=True",
                             "actor_rollout_ref.actor.profiler.ranks=[0]"], SCHEMA, ()) == []


def test_agent_loop_options_of_verls_tree_pass_and_the_rest_stay_refused():
    assert screen_overrides(["actor_rollout_ref.rollout.agent.num_workers=4"], SCHEMA, ()) == []
    with pytest.raises(ConfigError, match="verl.s agent-loop options other than default_agent_loop and agent_loop_config_path"):
        screen_overrides(["actor_rollout_ref.rollout.agent.some_option=1"], SCHEMA, ())


def test_warmup_style_renames_to_the_scheduler():
    assert screen_overrides(["critic.optim.warmup_style=cosine"], SCHEMA, ()) == ["critic.optim.lr_scheduler_type=cosine"]
    assert screen_overrides(["actor_rollout_ref.actor.optim.warmup_style=null"], SCHEMA, ()) == []
    with pytest.raises(ConfigError, match="warmup_style='linear': expected one of"):
        screen_overrides(["actor_rollout_ref.actor.optim.warmup_style=linear"], SCHEMA, ())


def test_a_key_verl_adds_later_is_named_as_newer_not_as_a_typo(tmp_path):
    """verl's current tree with one key no table knows (as verl will add more): the refusal says it is a
    verl key newer than the table and names the nearest known key; the same key in a user's own file (no
    verl config classes) stays an unknown key."""
    from siirl.config_checks import load_config

    tree = FIXTURES / "verl_config_2026_08"
    for entry in tree.iterdir():
        (tmp_path / entry.name).symlink_to(entry)
    (tmp_path / "newer.yaml").write_text(
        "defaults:\n  - ppo_trainer\n  - _self_\n"
        "actor_rollout_ref:\n  actor:\n    optim:\n      lr_warmup_curve: linear\n"
    )
    with pytest.raises(ConfigError) as info:
        load_config(["device=cpu"], config_path=str(tmp_path), config_name="newer")
    lines = [line for line in str(info.value).splitlines() if "lr_warmup_curve" in line]
    assert len(lines) == 1 and "a verl key newer than this table" in lines[0], str(info.value)
    assert "nearest known key: actor_rollout_ref.actor.optim.lr_warmup_steps" in lines[0], lines[0]
    (tmp_path / "own.yaml").write_text("actor_rollout_ref:\n  actor:\n    optim:\n      lr_warmup_curve: linear\n")
    with pytest.raises(ConfigError, match="unknown key actor_rollout_ref.actor.optim.lr_warmup_curve"):
        load_config(["device=cpu"], config_path=str(tmp_path), config_name="own")
