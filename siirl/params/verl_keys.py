"""verl's trainer-level spellings turned into the siiRL values they stand for, so a verl launch script's
overrides mean here what they meant there.

Runs on the composed config before the value checks. A verl key siiRL cannot honour as written is refused
in one line naming it.
"""

from __future__ import annotations

import logging
from contextlib import suppress

from omegaconf import DictConfig

from siirl.errors import ConfigError
from siirl.params.async_training import trainer_mode
from siirl.params.enums import WorkflowType
from siirl.params.fsdp import fold_mixed_precision
from siirl.params.ray_kwargs import drop_py_executable

logger = logging.getLogger(__name__)


def _canonical_workflow(cfg: DictConfig) -> None:
    """``workflow_type`` as its member spells it (``WorkflowType`` reads it case-insensitively)."""
    with suppress(ValueError):  # an unknown value is refused by the field's rule
        cfg.algorithm.workflow_type = WorkflowType(str(cfg.algorithm.workflow_type)).value


def _retention(cfg: DictConfig) -> None:
    """``max_actor_ckpt_to_keep`` / ``max_critic_ckpt_to_keep`` set ``max_ckpt_to_keep``: one checkpoint
    holds a whole step (actor and critic together), so per-component counts must agree."""
    trainer = cfg.trainer
    actor, critic = trainer.max_actor_ckpt_to_keep, trainer.max_critic_ckpt_to_keep
    if actor is not None and critic is not None and actor != critic:
        raise ConfigError(
            f"bad config: trainer.max_actor_ckpt_to_keep={actor} differs from trainer.max_critic_ckpt_to_keep="
            f"{critic}; siiRL checkpoints a step as a whole (actor and critic together), so set them equal"
        )
    kept = actor if actor is not None else critic
    if kept is not None:
        trainer.max_ckpt_to_keep = kept


def _resume_path(cfg: DictConfig) -> None:
    """verl's ``resume_mode=resume_path`` + ``resume_from_path=<dir>`` is siiRL's ``resume_mode=<dir>``
    (as in verl, ``resume_from_path`` is ignored under the other modes)."""
    trainer = cfg.trainer
    if trainer.resume_mode != "resume_path":
        return
    if not trainer.resume_from_path:
        raise ConfigError("bad config: trainer.resume_mode=resume_path needs trainer.resume_from_path=<checkpoint dir>")
    trainer.resume_mode = trainer.resume_from_path


def _assistant_turns(cfg: DictConfig) -> None:
    """verl's ``multi_turn.max_assistant_turns`` is siiRL's ``multi_turn.max_turns`` (policy turns)."""
    multi_turn = cfg.actor_rollout_ref.rollout.multi_turn
    if multi_turn.max_assistant_turns is not None and multi_turn.max_assistant_turns >= 1:  # else its rule refuses it
        multi_turn.max_turns = int(multi_turn.max_assistant_turns)


def _ref_param_offload(cfg: DictConfig) -> None:
    """siiRL's flat ``actor_rollout_ref.ref.param_offload`` is verl's ``ref.fsdp_config.param_offload``: the
    engine reads only the latter, so the flat key is folded into it (two different values are refused)."""
    ref = cfg.actor_rollout_ref.ref
    if ref.param_offload is None:
        return
    if ref.param_offload != ref.fsdp_config.param_offload and ref.fsdp_config.param_offload:
        raise ConfigError(
            "bad config: actor_rollout_ref.ref.param_offload=false contradicts "
            "actor_rollout_ref.ref.fsdp_config.param_offload=true; set only the fsdp_config key"
        )
    ref.fsdp_config.param_offload = ref.param_offload
    ref.param_offload = None


def _unfiltered_gen_batch(cfg: DictConfig) -> None:
    """verl's DAPO trainer without its group filter trains on the whole generation batch: a
    ``data.gen_batch_size`` that differs from ``data.train_batch_size`` is then the train batch."""
    data = cfg.data
    if data.gen_batch_size is None or data.gen_batch_size < 1 or cfg.algorithm.filter_groups.enable:
        return  # a bad size is refused by the value checks
    if trainer_mode(cfg) != "sync":
        return  # verl's fully-async streaming unit (siirl.params.async_checks), not the train batch
    if data.gen_batch_size != data.train_batch_size:
        logger.warning(
            "algorithm.filter_groups.enable=false: every generated group trains, so the train batch is "
            "data.gen_batch_size=%d prompts (data.train_batch_size=%d is not read), as in verl",
            data.gen_batch_size, data.train_batch_size,
        )
        data.train_batch_size = data.gen_batch_size


def apply_verl_keys(cfg: DictConfig) -> None:
    """Rewrite the verl spellings in ``cfg`` in place (see the module docstring), in this order."""
    for rewrite in (_canonical_workflow, _retention, _resume_path, _assistant_turns, _ref_param_offload,
                    _unfiltered_gen_batch, fold_mixed_precision, drop_py_executable):
        rewrite(cfg)
