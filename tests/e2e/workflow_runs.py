"""The built-in workflows' two-step trainings, shared by the modules that assert on them
(``test_train_algorithms.py`` and the option table's rows they already carry): one training per workflow
and process. Modules that share them run in one process (``xdist_group(GROUP)``)."""

from __future__ import annotations

GROUP = "workflow_runs"

WORKFLOWS = {
    "grpo": [],
    "ppo": ["critic.enable=true", "algorithm.adv_estimator=gae"],
    "dapo": ["algorithm.workflow_type=DAPO", "algorithm.filter_groups.enable=true",
             "algorithm.filter_groups.max_num_gen_batches=0", "actor_rollout_ref.actor.clip_ratio_high=0.28"],
    "gspo": ["algorithm.adv_estimator=gspo", "actor_rollout_ref.actor.policy_loss.loss_mode=gspo",
             "actor_rollout_ref.actor.loss_agg_mode=seq-mean-token-mean"],
    "cpgd": ["algorithm.adv_estimator=cpgd", "actor_rollout_ref.actor.policy_loss.loss_mode=cpgd",
             "actor_rollout_ref.actor.policy_drift_coeff=0.001"],
    "remax": ["algorithm.adv_estimator=remax"],
    "kl_in_reward": ["algorithm.use_kl_in_reward=true"],
    "custom_pipeline": ["dag.custom_pipeline_fn=examples.custom_pipeline.pipeline:build"],
}


def carrying(overrides: list[str]) -> str | None:
    """The workflow whose training sets every one of ``overrides`` to the same value, if any (the plain
    default run carries no override)."""
    wanted = set(overrides)
    return next((name for name, run in WORKFLOWS.items() if run and wanted <= set(run)), None)
