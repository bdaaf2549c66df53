"""Checks of user inputs on the driver, so a mistake is one line before Ray or any worker starts.

Everything a DAG worker would otherwise find only after minutes (an unknown registry name, a batch that
does not split over the data-parallel ranks, a dataset that filtering empties, an output dir that cannot
be written, a checkpoint that is missing or corrupt) is looked up here from the config and the plan. Each
check lives beside the feature it guards; this module calls them in order.
"""

from __future__ import annotations

import logging

from siirl.agent_loops import check_agent_names
from siirl.dag_worker.reward_setup import check_ground_truth, scores_by_rule
from siirl.data_coordinator.custom_sampler import sampler_class
from siirl.data_coordinator.dataloader import first_batches
from siirl.data_coordinator.image_grid import patch_size_mismatch
from siirl.data_coordinator.parquet_source import split_rows
from siirl.engine.reward.custom import check_call_signature, custom_reward_fn_from_config
from siirl.engine.rollout.tool_prompts import check_tool_prompt_width, check_tool_template
from siirl.engine.workers.lora import check_lora_targets
from siirl.engine.workers.model_loading import (
    check_config_overrides,
    check_model_weights,
    check_sequence_classifier,
    load_tokenizer,
    model_dir,
)
from siirl.engine.workers.padding_free import check_shared_layout
from siirl.engine.workers.ulysses import check_attention_heads
from siirl.engine.workers.varlen_attention import check_attention_names
from siirl.engine.workers.vision import load_image_processor
from siirl.environment.interactions import check_interaction_rows
from siirl.environment.registry import check_environment
from siirl.errors import ConfigError
from siirl.execution.roles import uses_critic
from siirl.execution.scheduler.plan import ExecutionPlan
from siirl.params import SiirlConfig
from siirl.params.data import data_tokenizer_model
from siirl.params.distillation import teacher_model_config
from siirl.user_files import check_output_dir

logger = logging.getLogger(__name__)


def check_inputs(cfg: SiirlConfig) -> None:
    """Attention kernels, environment, model dirs (tokenizer, weights, HF config), parquet rows, custom
    reward function and sampler, output dirs."""
    model = cfg.actor_rollout_ref.model
    check_attention_names(cfg)
    check_environment(cfg)
    check_tool_template(cfg)
    check_model_weights(model_dir(model))
    check_config_overrides([model] + ([cfg.critic.model] if cfg.critic.enable else []))
    check_lora_targets(model)  # a saved adapter's config and weights too
    if cfg.reward_model.enable:  # a sequence classifier (read from config.json) with sound weights
        check_sequence_classifier(cfg.reward_model.model)
        check_model_weights(model_dir(cfg.reward_model.model))
    check_attention_heads(cfg, uses_critic(cfg))
    check_shared_layout(cfg, uses_critic(cfg))
    if cfg.critic.enable:
        check_model_weights(model_dir(cfg.critic.model))
    if cfg.distillation.enabled:
        check_model_weights(model_dir(teacher_model_config(model, cfg.distillation)))
    for rows in split_rows(cfg.data):
        if scores_by_rule(cfg):
            check_ground_truth(rows)
        check_interaction_rows(cfg, rows)
        check_agent_names(cfg, rows)
    if cfg.custom_reward_function.path:
        check_call_signature(custom_reward_fn_from_config(cfg.custom_reward_function), cfg.reward_model.reward_manager)
    sampler_class(cfg.data)
    check_output_dir(str(cfg.trainer.output_dir))
    if cfg.trainer.default_local_dir:
        check_output_dir(cfg.trainer.default_local_dir, "trainer.default_local_dir")


def _data_dp_size(plan: ExecutionPlan) -> int:
    coord = plan.worker(0).data_coord()
    return coord.dp_size if coord is not None else plan.world_size


def check_batch_sizes(cfg: SiirlConfig, plan: ExecutionPlan) -> None:
    """Batch sizes split evenly over the plan's data-parallel ranks: checked here only, before Ray; the train
    loader and the workers size their shares from the plan."""
    rollout_dp = _data_dp_size(plan)
    for key, value in (("train_batch_size", cfg.data.train_batch_size), ("gen_batch_size", plan.resolved.prompts_per_draw)):
        if value % rollout_dp:
            raise ConfigError(
                f"bad config: data.{key}={value} must be divisible by the rollout data-parallel size "
                f"{rollout_dp} (trainer.nnodes x trainer.n_devices_per_node / tensor parallel)"
            )
    if cfg.data.val_files and 0 < cfg.data.val_batch_size < rollout_dp:
        raise ConfigError(
            f"bad config: data.val_batch_size={cfg.data.val_batch_size} is smaller than the rollout "
            f"data-parallel size {rollout_dp}"
        )
    n = cfg.actor_rollout_ref.rollout.n
    minis = (
        ("actor", "actor_rollout_ref.actor.ppo_mini_batch_size", cfg.actor_rollout_ref.actor.ppo_mini_batch_size),
        ("critic", "critic.ppo_mini_batch_size", cfg.critic.ppo_mini_batch_size),
    )
    for role, key, mini in minis:
        dp = plan.groups[role].dp_size if role in plan.groups else None
        if dp and mini * n < dp:
            raise ConfigError(
                f"bad config: {key}={mini} x actor_rollout_ref.rollout.n={n} is smaller than the {role} "
                f"data-parallel size {dp}"
            )


def check_data_shape(cfg: SiirlConfig, plan: ExecutionPlan) -> None:
    """The first batches rank 0 will load; a tool run's prompts re-rendered with the tools' schemas fit."""
    model = data_tokenizer_model(cfg)
    tokenizer, images = load_tokenizer(model), load_image_processor(model)
    mismatch = patch_size_mismatch(images, cfg.data.image_patch_size)  # None for a text policy
    if mismatch:
        logger.warning(mismatch)
    for batch in first_batches(cfg.data, tokenizer, images, _data_dp_size(plan), plan.resolved.prompts_per_draw):
        check_tool_prompt_width(cfg, batch, tokenizer)


def check_plan(cfg: SiirlConfig, plan: ExecutionPlan) -> None:
    check_batch_sizes(cfg, plan)
    check_data_shape(cfg, plan)
