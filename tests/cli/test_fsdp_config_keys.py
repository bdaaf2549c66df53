"""verl's ``fsdp_config`` keys under verl's paths: each accepted value loads, each refused one is ONE line,
exit 2, before Ray starts."""

import logging

import pytest
from cli_testutils import one_line_refusal

from siirl.config_checks import load_config
from siirl.params.fsdp import FSDP_SECTIONS

ACTOR, REF, CRITIC = (FSDP_SECTIONS[r] for r in ("actor", "reference", "critic"))


def _section(cfg, path: str):
    for part in path.split("."):
        cfg = getattr(cfg, part)
    return cfg


def _refusal(capsys, *overrides: str) -> str:
    return one_line_refusal(capsys, "--print-config", "device=cpu", *overrides)


@pytest.mark.parametrize("section", FSDP_SECTIONS.values())
@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        ("param_offload", "True", True),
        ("offload_policy", "true", True),
        ("reshard_after_forward", "false", False),
        ("forward_prefetch", "True", True),
        ("fsdp_size", "-1", -1),
        ("fsdp_size", "64", 64),  # >= the world: one shard group, as in verl
        ("model_dtype", "fp32", "fp32"),
        ("dtype", "bfloat16", "bfloat16"),
        ("wrap_policy.min_num_params", "0", 0),
        ("grad_offload", "False", False),
        ("strategy", "fsdp2", "fsdp2"),
        ("use_orig_params", "True", True),
    ],
)
def test_accepted_values_load(section, key, value, expected):
    cfg = load_config(["device=cpu", f"{section}.{key}={value}"])
    assert _section(cfg, f"{section}.{key}") == expected


@pytest.mark.parametrize("section", [ACTOR, CRITIC])
def test_optimizer_offload_loads_for_trained_models(section):
    assert _section(load_config([f"{section}.optimizer_offload=true"]), section).optimizer_offload is True


def test_optimizer_offload_of_the_reference_is_said_once_not_refused(caplog):
    """verl's forward-only engines ignore it (its Qwen3-Next scripts set it on the reference): said, loads."""
    with caplog.at_level(logging.WARNING):
        load_config(["device=cpu", f"{REF}.optimizer_offload=true"])
    said = [r.getMessage() for r in caplog.records if "optimizer_offload" in r.getMessage()]
    assert len(said) == 1 and "the reference has no optimizer" in said[0], said


@pytest.mark.parametrize(
    ("overrides", "named"),
    [
        ([f"{ACTOR}.fsdp_size=1", "trainer.n_devices_per_node=2"], "hybrid sharding"),
        ([f"{CRITIC}.fsdp_size=0"], "hybrid sharding"),
        ([f"{ACTOR}.wrap_policy.min_num_params=100000000"], "size-based wrapping"),
        ([f"{ACTOR}.grad_offload=true"], "set param_offload=true"),
        ([f"{ACTOR}.strategy=megatron"], "fsdp or fsdp2"),
        ([f"{ACTOR}.model_dtype=fp64"], "unknown model dtype"),
        ([f"{REF}.dtype=int8"], "unknown model dtype"),
        ([f"{ACTOR}.param_offload=true", "actor_rollout_ref.actor.strategy=replicate"], "use strategy=auto or fsdp"),
        ([f"{REF}.param_offload=true", "actor_rollout_ref.actor.strategy=replicate"], "use strategy=auto or fsdp"),
        ([f"{CRITIC}.offload_policy=true", "critic.strategy=replicate"], "use strategy=auto or fsdp"),
        (["actor_rollout_ref.ref.param_offload=false", f"{REF}.param_offload=true"], "set only the fsdp_config key"),
        ([f"{ACTOR}.param_ofload=true"], "param_ofload"),
    ],
)
def test_refusals_are_one_line(capsys, overrides, named):
    err = _refusal(capsys, *overrides)
    assert named in err and overrides[0].split("=")[0] in err, err


def test_flat_ref_param_offload_is_the_fsdp_config_key():
    ref = load_config(["actor_rollout_ref.ref.param_offload=true"]).actor_rollout_ref.ref
    assert ref.fsdp_config.param_offload is True and ref.param_offload is None  # one place of truth


def test_verl_append_of_a_known_key_sets_it():
    """verl scripts write ``+...fsdp_config.model_dtype=bfloat16``; the schema already has the key."""
    cfg = load_config([f"+{ACTOR}.model_dtype=bfloat16"])
    assert cfg.actor_rollout_ref.actor.fsdp_config.model_dtype == "bfloat16"
