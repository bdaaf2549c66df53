"""What an advantage estimator needs from the pipeline: metadata of its ``ADV_ESTIMATORS`` entry.

The built-in pipeline is derived from these needs: ``values`` adds the critic's value and training
nodes, ``reward_baselines`` adds the greedy-baseline node (ReMax), ``groups`` says the estimator compares
the responses of one prompt (uid), ``sum_pi_squared`` that it reads the old policy's per-token log-probs and
``sum_pi_squared`` (the actor's ``calculate_sum_pi_squared``), so the old-log-prob pass runs first;
``reward_components`` that it reads one value per response for each key ``algorithm.gdpo_reward_keys`` names
(keys of the score function's returned dict, which the reward node keeps in the batch). ``loss_mode`` is the
policy loss that ``loss_mode=auto`` picks for it;
``agent_chain`` that, in a team, each agent's advantage node waits for the next agent's (gae_marft).
A built-in estimator states them where it registers (``ADV_ESTIMATORS.register(name, needs=...)``); one
from user code (``algorithm.adv_estimator=my_module:my_fn``) is not registered, so it declares them with
``@declare_estimator_needs(...)``; without either it is treated like GRPO (groups, vanilla loss). Read them
with ``siirl.algorithms.estimator_needs(name)``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from siirl.params.algorithm import AlgorithmConfig

NEEDS_ATTR = "__siirl_estimator_needs__"


@dataclass(frozen=True)
class EstimatorNeeds:
    values: bool = False
    reward_baselines: bool = False
    groups: bool = True
    sum_pi_squared: bool = False
    reward_components: bool = False
    loss_mode: str = "vanilla"
    #: a team estimator: an agent's advantages continue from those of the agent acting after it (gae_marft)
    agent_chain: bool = False

    def batch_keys(self, algorithm: AlgorithmConfig | None = None) -> tuple[str, ...]:
        """Batch keys the advantage node reads because of this estimator (under ``algorithm``'s options)."""
        keys = ["uid"] if self.groups else []
        keys += ["values"] if self.values else []
        keys += ["reward_baselines"] if self.reward_baselines else []
        keys += ["old_log_probs", "sum_pi_squared"] if self.sum_pi_squared else []
        keys += self.component_keys(algorithm)
        return tuple(keys)

    def component_keys(self, algorithm: AlgorithmConfig | None) -> tuple[str, ...]:
        """The reward components the estimator reads: ``algorithm.gdpo_reward_keys`` when it reads any."""
        if not self.reward_components or algorithm is None:
            return ()
        return tuple(algorithm.gdpo_reward_keys or ())


def declare_estimator_needs(**needs: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """``@declare_estimator_needs(values=True)`` on an estimator function."""
    declared = EstimatorNeeds(**needs)

    def wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
        setattr(fn, NEEDS_ATTR, declared)
        return fn

    return wrap
