"""Keys verl moved (its reward section in February 2026, its critic engine section in April 2026) work at
both places; where two spellings disagree, the newest wins with one warning."""

import logging
import re
from operator import attrgetter

import pytest

from siirl.config_checks import load_config
from siirl.errors import ConfigError

#: (spellings from oldest to newest, value, the siiRL field they set)
MOVES = [
    (["reward_model.reward_manager", "reward_model.reward_manager.name", "reward.reward_manager.name"],
     "batch", "reward_model.reward_manager"),
    (["reward_model.num_workers", "reward.num_workers"], 3, "reward_model.num_workers"),
    (["reward_model.enable", "reward.reward_model.enable"], True, "reward_model.enable"),
    (["reward_model.model.path", "reward_model.model_path", "reward.reward_model.model_path"],
     "/models/rm", "reward_model.model.path"),
    (["custom_reward_function.name", "reward.custom_reward_function.name"], "my_score", "custom_reward_function.name"),
    (["reward_model.sandbox_fusion.url", "reward.sandbox_fusion.url"], "http://sandbox:8080/run_code",
     "reward_model.sandbox_fusion.url"),
    (["critic.model.fsdp_config.param_offload", "critic.fsdp.param_offload"], True,
     "critic.model.fsdp_config.param_offload"),
    (["critic.model.fsdp_config.reshard_after_forward", "critic.fsdp.reshard_after_forward"], False,
     "critic.model.fsdp_config.reshard_after_forward"),
]
OTHER = {"batch": "naive", 3: 5, True: False, False: True}


def _load(*overrides):
    return load_config(["device=cpu", *overrides])


@pytest.mark.parametrize(("spelling", "value", "field"), [(s, v, f) for keys, v, f in MOVES for s in keys])
def test_every_generation_of_a_key_sets_it(spelling, value, field):
    cfg = _load(f"{spelling}={value}".replace("=True", "=true").replace("=False", "=false"))
    assert attrgetter(field)(cfg) == value


@pytest.mark.parametrize(("keys", "value", "field"), MOVES)
def test_the_newest_spelling_wins_with_one_warning(caplog, keys, value, field):
    other = OTHER.get(value, f"{value}_old")
    newest, *older = reversed(keys)
    for order in ([*older, newest], [newest, *older]):  # wherever it stands on the command line
        caplog.clear()
        with caplog.at_level(logging.WARNING):
            cfg = _load(*(f"{k}={value if k == newest else other}" for k in order))
        assert attrgetter(field)(cfg) == value
        said = [r.getMessage() for r in caplog.records if "newer verl key" in r.getMessage()]
        assert len(said) == 1 and newest in said[0] and field in said[0]


def test_spellings_that_agree_say_nothing(caplog):
    with caplog.at_level(logging.WARNING):
        cfg = _load("reward_model.reward_manager=dapo", "reward.reward_manager.name=dapo")
    assert cfg.reward_model.reward_manager == "dapo"
    assert not [r for r in caplog.records if "newer verl key" in r.getMessage()]


def test_reward_kwargs_moved_with_the_reward_section():
    """verl's DAPO scripts: ``+reward.reward_kwargs.overlong_buffer_cfg.*`` where they wrote ``reward_model``."""
    cfg = _load(
        "reward.reward_manager.name=dapo", "data.max_response_length=64",
        "+reward.reward_kwargs.overlong_buffer_cfg.enable=True", "+reward.reward_kwargs.overlong_buffer_cfg.len=16",
        "+reward.reward_kwargs.overlong_buffer_cfg.penalty_factor=0.5", "+reward.reward_kwargs.max_resp_len=64",
    )
    buffer = cfg.reward_model.overlong_buffer
    assert (buffer.enable, buffer.len, buffer.penalty_factor, buffer.max_resp_len) == (True, 16, 0.5, 64)


@pytest.mark.parametrize(
    "override",
    ["reward.reward_model.rollout.name=vllm", "reward.reward_manager.source=register", "critic.fsdp.seed=42",
     "critic.fsdp.use_torch_compile=true"],
)
def test_a_moved_key_keeps_the_status_of_its_old_place(override):
    _load(override)  # not read / accepted at verl's default, as at the old place


@pytest.mark.parametrize(
    ("override", "said"),
    [("critic.fsdp.seed=7", "critic.fsdp.seed=7: siiRL seeds every worker"),
     ("reward.reward_kwargs.overlong_buffer_cfg.lenght=8", "unknown key reward.reward_kwargs.overlong_buffer_cfg.lenght")],
)
def test_a_moved_key_refused_at_its_old_place_is_refused_here_too_as_written(override, said):
    with pytest.raises(ConfigError, match=re.escape(said)):
        _load(override)


def test_a_newer_verl_tree_writes_the_old_keys_as_null_and_the_new_ones_win_silently(caplog):
    """verl's trees since the move keep ``reward_model.*`` at null beside ``reward.*``."""
    from siirl.params.root import SiirlConfig
    from siirl.params.schema_keys import schema_keys
    from siirl.params.tree_screen import screen_tree

    tree = {
        "reward_model": {"reward_manager": None, "num_workers": None, "model": {"path": None}},
        "reward": {"reward_manager": {"name": "dapo"}, "num_workers": 4, "reward_model": {"model_path": None}},
        "critic": {"fsdp": {"param_offload": True}},
    }
    with caplog.at_level(logging.WARNING):
        screened = screen_tree(tree, schema_keys(SiirlConfig))
    assert screened["reward_model"]["reward_manager"] == "dapo" and screened["reward_model"]["num_workers"] == 4
    assert screened["critic"]["model"]["fsdp_config"]["param_offload"] is True
    assert "reward" not in screened and not caplog.records
