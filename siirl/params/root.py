"""The whole config tree, registered with Hydra's ConfigStore as the schema the YAML is checked against."""

from dataclasses import dataclass, field
from typing import Any

from hydra.core.config_store import ConfigStore

from siirl.errors import ConfigError
from siirl.params.algorithm import AlgorithmConfig, CustomRewardFunctionConfig, RewardModelConfig
from siirl.params.async_training import AsyncTrainingConfig, RolloutPlacementConfig
from siirl.params.data import DataConfig
from siirl.params.distillation import DistillationConfig
from siirl.params.environment import EnvConfig
from siirl.params.model import ActorRolloutRefConfig, CriticConfig
from siirl.params.ray_kwargs import RayKwargsConfig
from siirl.params.sequence_parallel import check_sequence_parallel
from siirl.params.trainer import DagConfig, GlobalProfilerConfig, TrainerConfig

SCHEMA_NAME = "siirl_schema"


@dataclass
class SiirlConfig:
    data: DataConfig = field(default_factory=DataConfig)
    actor_rollout_ref: ActorRolloutRefConfig = field(default_factory=ActorRolloutRefConfig)
    critic: CriticConfig = field(default_factory=CriticConfig)
    reward_model: RewardModelConfig = field(default_factory=RewardModelConfig)
    custom_reward_function: CustomRewardFunctionConfig = field(default_factory=CustomRewardFunctionConfig)
    algorithm: AlgorithmConfig = field(default_factory=AlgorithmConfig)
    trainer: TrainerConfig = field(default_factory=TrainerConfig)
    dag: DagConfig = field(default_factory=DagConfig)
    env: EnvConfig = field(default_factory=EnvConfig)
    global_profiler: GlobalProfilerConfig = field(default_factory=GlobalProfilerConfig)
    ray_kwargs: RayKwargsConfig = field(default_factory=RayKwargsConfig)
    async_training: AsyncTrainingConfig = field(default_factory=AsyncTrainingConfig)
    #: verl's fully-async rollout placement (``rollout.nnodes``, ``rollout.n_gpus_per_node``).
    rollout: RolloutPlacementConfig = field(default_factory=RolloutPlacementConfig)
    #: verl's on-policy distillation from a frozen teacher (the ``teacher`` model role).
    distillation: DistillationConfig = field(default_factory=DistillationConfig)

    def validate(self, cfg: Any, key: str) -> None:
        """Rules across sections: whole mini-batches per step, a replayed step cannot draw more, Ulysses sizes."""
        data, actor = self.data, self.actor_rollout_ref.actor
        if data.train_batch_size % max(actor.ppo_mini_batch_size, 1):
            raise ConfigError(
                "bad config: data.train_batch_size must be a multiple of actor_rollout_ref.actor.ppo_mini_batch_size "
                f"(got {data.train_batch_size} and {actor.ppo_mini_batch_size})"
            )
        if self.actor_rollout_ref.rollout.skip.enable and self.algorithm.filter_groups.enable:
            raise ConfigError(
                "bad config: actor_rollout_ref.rollout.skip.enable replays one dumped batch per step, and dynamic "
                "sampling (algorithm.filter_groups.enable) would draw more for a step; use one of them"
            )
        check_sequence_parallel(self)


def or_defaults(cfg: SiirlConfig | None) -> SiirlConfig:
    """``cfg``, or the schema's defaults for ``None``: planning helpers take ``None`` as "all defaults"."""
    return cfg if cfg is not None else SiirlConfig()


#: How messages name the keys of the user's modules (verl's ``model.external_lib`` of each model section).
EXTERNAL_LIB_KEY = "model.external_lib"


def external_libs(cfg: SiirlConfig) -> list[str]:
    """The user modules the config's ``*.model.external_lib`` keys name (policy, critic, reward model), each
    once, in that order."""
    named: list[str] = []
    for model in (cfg.actor_rollout_ref.model, cfg.critic.model, cfg.reward_model.model):
        value = model.external_lib
        named.extend([value] if isinstance(value, str) else list(value or ()))
    return list(dict.fromkeys(named))


def register_schema() -> None:
    """Once per process: storing converts the whole dataclass tree, a good part of composing a config."""
    store = ConfigStore.instance()
    if f"{SCHEMA_NAME}.yaml" not in store.repo:
        store.store(name=SCHEMA_NAME, node=SiirlConfig)
