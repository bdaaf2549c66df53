"""The per-response values DAPO's group filter compares (``algorithm.filter_groups.metric``), by verl's names.

A group (one prompt's responses) is kept when its values are not all equal. Each entry turns a scored batch
into one value per response and declares the batch key it reads, so planning can refuse a metric the
configured reward does not write (``acc`` / ``score`` come from a rule reward manager, not a reward model):

- ``acc``: the score function's ``acc`` (its score where it reports none, as verl's DAPO manager does);
- ``score``: the score function's score, before DAPO's overlong penalty;
- ``seq_reward``: the reward summed over the response (``token_level_scores``, penalty included);
- ``seq_final_reward``: the same after KL in the reward (``token_level_rewards``).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from tensordict import TensorDictBase

from siirl.errors import ConfigError
from siirl.params.root import SiirlConfig
from siirl.registry import Registry

MetricFn = Callable[[TensorDictBase], torch.Tensor]

GROUP_FILTER_METRICS: Registry[MetricFn] = Registry(
    "group filter metric", config_keys=("algorithm.filter_groups.metric",)
)


def _field(batch: TensorDictBase, key: str) -> torch.Tensor:
    if key not in batch.keys():  # noqa: SIM118 - keys() works on every tensordict release
        raise ValueError(f"batch has no {key!r} field (run the reward node before the group filter)")
    return batch.get(key)


def _response_sum(batch: TensorDictBase, key: str) -> torch.Tensor:
    values = _field(batch, key)
    if "response_mask" in batch.keys():  # noqa: SIM118
        values = values * batch.get("response_mask").to(values.dtype)
    return values.sum(dim=-1)


@GROUP_FILTER_METRICS.register("acc", reads="acc", rule_reward=True)
def response_accuracy(batch: TensorDictBase) -> torch.Tensor:
    return _field(batch, "acc").reshape(-1)


@GROUP_FILTER_METRICS.register("score", reads="score", rule_reward=True)
def response_score(batch: TensorDictBase) -> torch.Tensor:
    return _field(batch, "score").reshape(-1)


@GROUP_FILTER_METRICS.register("seq_reward", reads="token_level_scores")
def sequence_reward(batch: TensorDictBase) -> torch.Tensor:
    return _response_sum(batch, "token_level_scores")


@GROUP_FILTER_METRICS.register("seq_final_reward", reads="token_level_rewards")
def sequence_final_reward(batch: TensorDictBase) -> torch.Tensor:
    return _response_sum(batch, "token_level_rewards")


def metric_reads(name: str) -> str:
    """The batch key the metric ``name`` is computed from (an unknown name: one ConfigError line)."""
    return GROUP_FILTER_METRICS.metadata(name)["reads"]


def from_rule_reward(name: str) -> bool:
    """Whether only a rule reward manager reports the metric ``name`` (not a reward model or environment)."""
    return bool(GROUP_FILTER_METRICS.metadata(name).get("rule_reward"))


def group_filter_values(batch: TensorDictBase, name: str) -> torch.Tensor:
    """One value per response of ``batch`` for the metric ``name``."""
    return GROUP_FILTER_METRICS.get(name)(batch)


def check_group_filter_metric(cfg: SiirlConfig, env_driven: bool) -> None:
    """``acc`` and ``score`` come from a rule reward manager's score function, which a reward model or an
    environment (``env_driven``) replaces."""
    groups = cfg.algorithm.filter_groups
    if not groups.enable or not from_rule_reward(groups.metric):
        return
    if cfg.reward_model.enable:
        scorer = "reward_model.enable=true (the reward model's score replaces the rule reward)"
    elif env_driven:
        scorer = "environment-driven rollouts (the environment scores them)"
    else:
        return
    raise ConfigError(
        f"bad config: algorithm.filter_groups.metric={groups.metric} is reported by a rule reward's score "
        f"function, which {scorer} does not run; use seq_reward or seq_final_reward"
    )
