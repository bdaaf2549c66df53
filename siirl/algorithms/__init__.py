"""The math of every workflow: advantage estimators, policy / value / KL losses, loss aggregation, DAPO.

Pure torch functions over ``(batch, response_len)`` tensors with a response mask. Each family is a
registry (:class:`siirl.registry.Registry`): add a variant by writing one function and decorating it
(``ADV_ESTIMATORS.register(name, needs=...)``, ``register_policy_loss``, ...). Importing this package
registers every built-in variant.
"""

from siirl.algorithms import (  # noqa: F401  (registries)
    cispo,
    gdpo,
    gmpo,
    gpg,
    group_filter_metrics,
    marft_gae,
    optimal_token_baseline,
    outcome_advantage,
    pf_ppo,
    return_advantage,
    sapo,
)
from siirl.algorithms.advantage import (
    ADV_ESTIMATORS,
    AdvantageInputs,
    compute_advantage,
    estimator_needs,
    get_adv_estimator,
)
from siirl.algorithms.aggregation import AGG_MODES, agg_loss
from siirl.algorithms.dapo import (
    GenerationBudgetExceeded,
    filter_zero_variance_groups,
    overlong_reward_penalty,
)
from siirl.algorithms.kl import (
    KL_CONTROLLERS,
    KL_ESTIMATORS,
    AdaptiveKLController,
    FixedKLController,
    KLController,
    apply_kl_penalty,
    kl_loss,
    kl_penalty,
    make_kl_controller,
)
from siirl.algorithms.logits import entropy_from_logits, logprobs_from_logits
from siirl.algorithms.masked import masked_mean, masked_sum, masked_var, masked_whiten
from siirl.algorithms.needs import EstimatorNeeds, declare_estimator_needs
from siirl.algorithms.outcome_advantage import CPGD_WEIGHTS
from siirl.algorithms.policy_loss import (
    POLICY_LOSSES,
    PolicyLossInputs,
    compute_policy_loss,
    get_policy_loss,
    register_policy_loss,
)
from siirl.algorithms.value import compute_value_loss

__all__ = [
    "ADV_ESTIMATORS",
    "AGG_MODES",
    "CPGD_WEIGHTS",
    "KL_CONTROLLERS",
    "KL_ESTIMATORS",
    "POLICY_LOSSES",
    "AdaptiveKLController",
    "AdvantageInputs",
    "EstimatorNeeds",
    "FixedKLController",
    "GenerationBudgetExceeded",
    "KLController",
    "PolicyLossInputs",
    "agg_loss",
    "apply_kl_penalty",
    "compute_advantage",
    "compute_policy_loss",
    "compute_value_loss",
    "declare_estimator_needs",
    "entropy_from_logits",
    "estimator_needs",
    "filter_zero_variance_groups",
    "get_adv_estimator",
    "get_policy_loss",
    "kl_loss",
    "kl_penalty",
    "logprobs_from_logits",
    "make_kl_controller",
    "masked_mean",
    "masked_sum",
    "masked_var",
    "masked_whiten",
    "overlong_reward_penalty",
    "register_policy_loss",
]
