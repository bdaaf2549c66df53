"""FSDP2 engine workers: the policy (``ActorWorker``), the frozen reference (``ReferenceWorker``), the
PPO value model (``CriticWorker``) and the reward model (``RewardModelWorker``), with padding-free
micro-batching shared by all four."""

from siirl.engine.workers.actor import ActorWorker
from siirl.engine.workers.critic import CriticWorker
from siirl.engine.workers.model_loading import ModelLoadError, load_tokenizer
from siirl.engine.workers.reference import ReferenceWorker
from siirl.engine.workers.reward_model import RewardModelWorker

__all__ = ["ActorWorker", "CriticWorker", "ModelLoadError", "ReferenceWorker", "RewardModelWorker", "load_tokenizer"]
