"""verl's deprecated global micro-batch sizes are divided by the data-parallel size into the per-device
keys, as verl's FSDP workers do; both forms at once are refused in one line."""

import pytest

from siirl.config_checks import load_config
from siirl.errors import ConfigError

TWO_BY_TWO = ["trainer.nnodes=2", "trainer.n_gpus_per_node=2"]


def test_global_sizes_become_per_device_sizes():
    cfg = load_config([
        *TWO_BY_TWO,
        "actor_rollout_ref.actor.ppo_micro_batch_size=16",
        "actor_rollout_ref.rollout.log_prob_micro_batch_size=8",
        "actor_rollout_ref.ref.log_prob_micro_batch_size=null",
        "critic.ppo_micro_batch_size=4",
    ])
    arr = cfg.actor_rollout_ref
    assert (arr.actor.ppo_micro_batch_size_per_gpu, arr.actor.use_dynamic_bsz) == (4, False)
    assert (arr.rollout.log_prob_micro_batch_size_per_gpu, arr.rollout.log_prob_use_dynamic_bsz) == (2, False)
    assert cfg.critic.ppo_micro_batch_size_per_gpu == 1
    # null (as verl's DAPO script writes it) is "not set": token-budget batching stays on
    assert arr.ref.log_prob_use_dynamic_bsz
    assert arr.actor.ppo_micro_batch_size is None  # folded: the engine reads one key


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        (["actor_rollout_ref.actor.ppo_micro_batch_size=8", "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2"],
         "both actor_rollout_ref.actor.ppo_micro_batch_size and actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu"),
        (["actor_rollout_ref.ref.log_prob_micro_batch_size=3"],
         "actor_rollout_ref.ref.log_prob_micro_batch_size=3 is smaller than the data-parallel size 4"),
    ],
)
def test_bad_global_sizes_are_one_line(overrides, expected):
    with pytest.raises(ConfigError) as info:
        load_config([*TWO_BY_TWO, *overrides])
    assert expected in str(info.value) and "\n" not in str(info.value)
