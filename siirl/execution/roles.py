"""Model roles: one registered spec per kind of model a run may hold (policy, reference, critic, ...).

The planner keys every model as a slot (``actor``, ``critic``, ``<agent>/actor``); a spec says, for its
role, which config section describes it, whether the run has it (answered at plan time, without importing
torch), how a DAG worker builds it (a builder the worker registers by name), what of it goes
into checkpoints and how it is closed. Node contracts name roles (``roles=("critic",)``); the planner
refuses a node whose role the config does not provide, and the worker builds ``models[key]`` for each
role its own nodes name. Adding a role is one ``ROLES.register`` here, its builder, a node and a
pipeline step.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from siirl.errors import ConfigError
from siirl.execution.dag.node_types import NodeRole
from siirl.params.root import SiirlConfig
from siirl.params.sequence_parallel import SP_KEYS, sequence_parallel_sizes
from siirl.registry import Registry

#: ``available(cfg)``: None when the run configures this model, else the reason it does not.
Availability = Callable[[SiirlConfig], "str | None"]


@dataclass(frozen=True)
class RoleSpec:
    """One kind of model. ``key`` is its slot name (an agent's is ``<agent>/<key>``); ``group`` the node
    role whose process group it shards over; ``builder`` names ``fn(ctx, key, agent, roles) -> model`` in the
    worker's ``MODEL_BUILDERS`` (siirl.dag_worker.models) or is a ``module:function``; empty when nothing is
    built for the role (the environment lives inside the policy's rollout)."""

    key: str
    section: str
    available: Availability
    group: NodeRole
    builder: str = ""
    #: The model's trainable state is checkpointed (its ``checkpoint_target()`` is saved and restored).
    checkpointed: bool = False
    #: ``fn(cfg)`` -> the role whose model also serves this one, or None when it has a model of its own
    #: (under LoRA the reference is the actor's model with its adapters off): that slot is built first.
    served_by: Callable[[SiirlConfig], str | None] | None = None


ROLES: Registry[RoleSpec] = Registry("model role")


def model_key(spec: RoleSpec, agent: str = "") -> str:
    """The slot of ``spec``'s model: ``actor`` for the single policy, ``adder/actor`` for agent ``adder``."""
    return f"{agent}/{spec.key}" if agent else spec.key


def uses_reference(cfg: SiirlConfig) -> bool:
    """A reference policy is loaded only when a KL term needs it (in the loss or in the reward)."""
    return bool(cfg.actor_rollout_ref.actor.use_kl_loss or cfg.algorithm.use_kl_in_reward)


def uses_lora(cfg: SiirlConfig) -> bool:
    """The policy trains LoRA adapters on a frozen base model (``actor_rollout_ref.model.lora_rank``)."""
    from siirl.params.lora import lora_enabled

    return lora_enabled(cfg.actor_rollout_ref.model)


def _reference_host(cfg: SiirlConfig) -> str | None:
    return "actor" if uses_lora(cfg) else None


def uses_critic(cfg: SiirlConfig) -> bool:
    """A critic is loaded when enabled or when the advantage estimator needs values."""
    from siirl.algorithms import estimator_needs

    return bool(cfg.critic.enable) or estimator_needs(cfg.algorithm.adv_estimator).values


def uses_teacher(cfg: SiirlConfig) -> bool:
    """On-policy distillation scores the student's samples with a frozen teacher (``distillation.enabled``)."""
    return bool(cfg.distillation.enabled)


def _always(cfg: SiirlConfig) -> str | None:
    return None


def _reference(cfg: SiirlConfig) -> str | None:
    if uses_reference(cfg):
        return None
    return "no KL term is configured (actor_rollout_ref.actor.use_kl_loss / algorithm.use_kl_in_reward)"


def _teacher(cfg: SiirlConfig) -> str | None:
    return None if uses_teacher(cfg) else "distillation.enabled=false (there is no teacher to distil from)"


def _critic(cfg: SiirlConfig) -> str | None:
    return None if uses_critic(cfg) else "critic.enable=false and the advantage estimator needs no values"


def _reward_model(cfg: SiirlConfig) -> str | None:
    return None if cfg.reward_model.enable else "reward_model.enable=false (rule rewards need no model)"


def _environment(cfg: SiirlConfig) -> str | None:
    """None when the run drives an environment that resolves, else why not."""
    from siirl.environment.outputs import env_mode
    from siirl.environment.registry import resolve_env_factory
    from siirl.errors import SiirlUserError

    if env_mode(cfg) is None:
        return (
            "the run drives no environment (set actor_rollout_ref.rollout.multi_turn.enable=true or "
            "algorithm.workflow_type=EMBODIED)"
        )
    try:
        resolve_env_factory(cfg.env.name)
    except SiirlUserError as exc:
        return str(exc)
    return None


#: The policy answers to both names: ``rollout`` nodes sample with it, ``actor`` nodes train it.
ROLES.register("actor", "rollout")(RoleSpec(
    "actor", "actor_rollout_ref", _always, NodeRole.ACTOR, builder="policy", checkpointed=True,
))
ROLES.register("reference")(RoleSpec(
    "reference", "actor_rollout_ref.ref", _reference, NodeRole.REFERENCE, builder="reference",
    served_by=_reference_host,
))
ROLES.register("teacher")(RoleSpec(
    "teacher", "distillation", _teacher, NodeRole.TEACHER, builder="teacher",
))
ROLES.register("critic")(RoleSpec(
    "critic", "critic", _critic, NodeRole.CRITIC, builder="critic", checkpointed=True,
))
ROLES.register("reward_model")(RoleSpec(
    "reward_model", "reward_model", _reward_model, NodeRole.REWARD, builder="reward_model",
))
ROLES.register("environment")(RoleSpec("environment", "env", _environment, NodeRole.ROLLOUT))

#: The role a model node without a declared contract acts for, by its ``node_role``.
NODE_ROLE_SPECS = {
    NodeRole.ROLLOUT: "rollout", NodeRole.ACTOR: "actor", NodeRole.REFERENCE: "reference",
    NodeRole.CRITIC: "critic", NodeRole.TEACHER: "teacher",
}


def check_reference_sequence_parallel(cfg: SiirlConfig) -> None:
    """A reference served by the policy's own model (LoRA: adapters off) runs in the policy's sp groups."""
    sizes = sequence_parallel_sizes(cfg)
    if ROLES.get("reference").served_by(cfg) is not None and sizes["reference"] != sizes["actor"]:
        raise ConfigError(
            f"bad config: under LoRA the reference is the actor's model with its adapters off, so "
            f"{SP_KEYS['reference']}={sizes['reference']} must equal {SP_KEYS['actor']}={sizes['actor']}"
        )


def check_vision_policy(cfg: SiirlConfig) -> None:
    """A vision-language policy needs a rollout engine that passes it the images; a critic of one would
    score token ids without them, sequence parallelism would split image tokens from their images, and the
    rollout dump (``rollout.skip``) cannot hold them."""
    from siirl.engine.rollout.choice import configured_engine
    from siirl.engine.workers.vision import policy_sees_images

    if not policy_sees_images(cfg):
        return
    if not configured_engine(cfg).takes_images:
        raise ConfigError(
            f"bad config: {cfg.actor_rollout_ref.model.path} is a vision-language model and the "
            f"'{cfg.actor_rollout_ref.rollout.name}' rollout engine does not pass images yet; set "
            "actor_rollout_ref.rollout.name=hf, vllm or sglang"
        )
    if uses_critic(cfg):
        raise ConfigError(
            "bad config: a critic (critic.enable / adv_estimator=gae) of a vision-language policy is not "
            "implemented (it would not see the images); use a critic-free estimator such as grpo"
        )
    if max(sequence_parallel_sizes(cfg).values()) > 1:
        raise ConfigError(
            "bad config: Ulysses sequence parallelism (ulysses_sequence_parallel_size > 1) of a vision-language "
            "policy is not implemented (its image tokens would be split from their images); set it to 1"
        )
    if cfg.actor_rollout_ref.rollout.skip.enable:
        raise ConfigError(
            "bad config: actor_rollout_ref.rollout.skip.enable=true with a vision-language policy: the rollout dump "
            "does not hold its image inputs (nested fields); turn the skip off for this run"
        )
