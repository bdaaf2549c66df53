"""Rollout correction's bypass mode: the old log-probs are the rollout's (no actor forward), the decoupled
correction before the advantage steps aside for the loss's, and each impossible combination is one line
before Ray."""

import pytest
import torch
from tensordict import TensorDict

from siirl.config_checks import load_config
from siirl.errors import ConfigError

BYPASS = ["actor_rollout_ref.rollout.calculate_log_probs=True", "algorithm.rollout_correction.bypass_mode=True",
          "algorithm.rollout_correction.rollout_is=token"]
# bfloat16: the recorded log-probs are approximate, so ``auto`` alone would recompute them
APPROXIMATE = ["actor_rollout_ref.model.dtype=bfloat16"]


class _ForwardCountingActor:
    def __init__(self) -> None:
        self.calls = 0

    def compute_log_prob(self, batch):
        self.calls += 1
        return TensorDict({"old_log_probs": torch.zeros(batch["responses"].shape)}, batch_size=batch.batch_size)


def test_bypass_takes_old_log_probs_from_the_rollout_without_a_forward():
    from siirl.dag_worker.batch_reweighting import apply_rollout_correction
    from siirl.dag_worker.builtin_nodes import compute_old_log_prob
    from siirl.dag_worker.context import WorkerContext
    from siirl.dag_worker.policy import Policy

    cfg = load_config([*BYPASS, *APPROXIMATE, "algorithm.rollout_correction.loss_type=reinforce"])
    assert cfg.actor_rollout_ref.actor.old_log_prob_source == "rollout"
    assert cfg.algorithm.rollout_correction.loss_type == "reinforce"
    recorded = torch.tensor([[-0.5, -0.25], [-1.0, 0.0]])
    batch = TensorDict({"responses": torch.ones(2, 2, dtype=torch.long), "response_mask": torch.tensor([[1, 1], [1, 0]]),
                        "rollout_log_probs": recorded, "rollout_entropys": torch.ones(2, 2)}, batch_size=[2])
    from_rollout = cfg.actor_rollout_ref.actor.old_log_prob_source == "rollout"  # as siirl.dag_worker.models sets it
    policy = Policy(_ForwardCountingActor(), None, kl_ctrl=None, old_log_probs_from_rollout=from_rollout)
    ctx = WorkerContext(cfg=cfg, plan=None, rank=0, backend=None, tokenizer=None, graph=None, models={"actor": policy})
    out = compute_old_log_prob(batch, ctx=ctx).batch
    assert policy.actor.calls == 0
    assert torch.equal(out["old_log_probs"], recorded)
    assert apply_rollout_correction(out, cfg) == {}  # corrected inside the loss instead
    assert "rollout_is_weights" not in out.keys()  # noqa: SIM118


@pytest.mark.parametrize(
    ("overrides", "named"),
    [
        (["algorithm.rollout_correction.bypass_mode=True"],
         "bypass_mode=true compares the rollout's log-probs with the actor's; set actor_rollout_ref.rollout.calculate_log_probs=true"),
        ([*BYPASS, "actor_rollout_ref.actor.old_log_prob_source=recompute"], "old_log_prob_source=recompute asks for"),
        ([*BYPASS, "algorithm.rollout_correction.loss_type=dpo"], "loss_type='dpo': unknown rollout-correction loss_type"),
        ([*BYPASS, "algorithm.adv_estimator=gspo"], "not actor_rollout_ref.actor.policy_loss.loss_mode=gspo"),
        ([*BYPASS, "actor_rollout_ref.rollout.multi_turn.enable=true"], "bypass_mode=true needs log-probs recorded"),
        ([*BYPASS, "actor_rollout_ref.actor.calculate_sum_pi_squared=True"], "bypass_mode=true skips the actor forward"),
    ],
)
def test_impossible_bypass_combinations_are_one_line(overrides, named):
    with pytest.raises(ConfigError) as info:
        load_config(overrides)
    assert named in str(info.value) and "\n" not in str(info.value)


def test_loss_type_is_case_insensitive_like_verl_enums():
    cfg = load_config([*BYPASS, "algorithm.rollout_correction.loss_type=PPO_CLIP"])
    assert cfg.algorithm.rollout_correction.loss_type == "ppo_clip"
