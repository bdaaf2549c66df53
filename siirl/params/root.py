"""The whole config tree, registered with Hydra's ConfigStore as the schema the YAML is checked against."""

from dataclasses import dataclass, field

from hydra.core.config_store import ConfigStore

from siirl.params.algorithm import AlgorithmConfig, CustomRewardFunctionConfig, RewardModelConfig
from siirl.params.data import DataConfig
from siirl.params.environment import EnvConfig
from siirl.params.model import ActorRolloutRefConfig, CriticConfig
from siirl.params.ray_kwargs import RayKwargsConfig
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


def or_defaults(cfg: SiirlConfig | None) -> SiirlConfig:
    """``cfg``, or the schema's defaults for ``None``: planning helpers take ``None`` as "all defaults"."""
    return cfg if cfg is not None else SiirlConfig()


def register_schema() -> None:
    ConfigStore.instance().store(name=SCHEMA_NAME, node=SiirlConfig)
