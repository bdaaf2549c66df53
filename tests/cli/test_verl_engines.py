"""verl's training engines other than FSDP (VeOmni, TorchTitan, Automodel, megatron-lite, FSDP-Turbo) are
refused in one line naming the engine, before the unknown keys their own sections would cause."""

import pytest
from launch_scripts import documented_unsupported

from siirl.config_checks import load_config
from siirl.errors import ConfigError
from siirl.params.verl_engines import ENGINES, engine_refusal


@pytest.mark.parametrize(
    ("overrides", "named"),
    [
        (["model_engine=veomni", "actor_rollout_ref.actor.veomni.param_offload=True"], "VeOmni"),
        (["actor_rollout_ref.actor.veomni.fsdp_size=-1"], "VeOmni"),
        (["model_engine=torchtitan"], "TorchTitan"),
        (["actor@actor_rollout_ref.actor=mlite_actor", "actor_rollout_ref.actor.engine.tp=1"], "megatron-lite"),
        (["actor_rollout_ref.actor.strategy=fsdp_turbo",
          "actor_rollout_ref.actor.fsdp_config.turbo_config.distributed.fully_shard_parallel_size=8"], "FSDP-Turbo"),
    ],
)
def test_another_engine_is_one_line_naming_it(overrides, named):
    with pytest.raises(ConfigError) as info:
        load_config(["device=cpu", *overrides])
    message = str(info.value)
    assert "\n" not in message and named in message and "FSDP2" in message, message


def test_verls_dp_engine_and_fsdp_strategies_pass():
    for key, value in (("model_engine", "dp"), ("actor_rollout_ref.actor.strategy", "fsdp2"),
                       ("actor_rollout_ref.actor.fsdp_config.strategy", "fsdp")):
        assert engine_refusal(key, value) is None
    assert load_config(["device=cpu", "model_engine=dp"]).trainer.device == "cpu"


def test_every_engine_is_in_the_guides_unsupported_list():
    documented = {span for item in documented_unsupported() for span in item}
    assert [why for why in ENGINES.values() if not any(span in why for span in documented)] == []
