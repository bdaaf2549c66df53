"""The advantage node's optional passes over the batch, both verl ``algorithm`` options:

- rollout correction (``algorithm.rollout_correction``), before the estimator: where the rollout recorded the
  log-probs it sampled with (``rollout.calculate_log_probs=true``), compare them with the actor's
  ``old_log_probs``; rejected tokens leave ``response_mask`` and IS weights go to the policy loss as
  ``rollout_is_weights`` (``siirl.algorithms.rollout_correction``); not in bypass mode, whose loss corrects;
- policy-filtered PPO (``algorithm.use_pf_ppo``), after it: resample the rows by reward
  (``siirl.algorithms.pf_ppo``), seeded by ``trainer.seed``, the step and the rank so runs repeat.
"""

from __future__ import annotations

import torch
from tensordict import TensorDict

from siirl.algorithms.pf_ppo import pf_ppo_sample_indices
from siirl.algorithms.rollout_correction import IS_WEIGHTS_KEY, correct_rollout
from siirl.data_coordinator.tensordict_ops import select_rows
from siirl.params.algorithm import AlgorithmConfig
from siirl.params.root import SiirlConfig


def compares_rollout_log_probs(cfg: SiirlConfig) -> bool:
    """Rollout correction runs where the user asked the rollout to record its log-probs
    (``calculate_log_probs``; siiRL may also record them for its own use as old log-probs), so the advantage
    node then needs the actor's ``old_log_probs`` computed first (as verl orders it)."""
    return bool(cfg.actor_rollout_ref.rollout.calculate_log_probs)


def has_rollout_log_probs(batch: TensorDict, cfg: SiirlConfig) -> bool:
    return compares_rollout_log_probs(cfg) and "rollout_log_probs" in batch.keys()  # noqa: SIM118


def apply_rollout_correction(batch: TensorDict, cfg: SiirlConfig) -> dict[str, float]:
    """Correct ``batch`` in place; returns verl's ``rollout_corr/*`` metrics ({} when nothing was recorded).
    Bypass mode corrects inside the policy loss instead (``siirl.algorithms.bypass_loss``): here the old
    log-probs ARE the rollout's, so there is nothing to compare yet."""
    if cfg.algorithm.rollout_correction.bypass_mode or not has_rollout_log_probs(batch, cfg):
        return {}
    algo = cfg.algorithm
    result = correct_rollout(
        batch["old_log_probs"], batch["rollout_log_probs"], batch["response_mask"], algo.rollout_correction
    )
    batch["response_mask"] = result.response_mask
    if result.weights is not None:
        batch[IS_WEIGHTS_KEY] = result.weights.to(batch["old_log_probs"].dtype)
    return result.metrics


def pf_ppo_resample(batch: TensorDict, algo: AlgorithmConfig, seed: int, step: int, rank: int) -> TensorDict:
    """``batch``'s rows drawn by reward (as many as it has) when ``use_pf_ppo``, else ``batch`` itself."""
    if not algo.use_pf_ppo:
        return batch
    generator = torch.Generator().manual_seed(hash((seed, step, rank)) & 0x7FFF_FFFF_FFFF_FFFF)
    scores = batch["token_level_scores"].sum(dim=-1)
    indices = pf_ppo_sample_indices(scores, algo.pf_ppo.reweight_method, algo.pf_ppo.weight_pow, generator)
    return select_rows(batch, indices)
