"""A policy: the actor (weights + optimiser), its rollout engine, and the state that ties them together.

The single policy of a run and every agent of a team are each one ``Policy`` (slots ``actor`` and
``<agent>/actor``), so sampling, log-probs, the KL controller and updates go through the same code.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from siirl.device.weight_sync import WeightSync, make_weight_sync
from siirl.engine.rollout.base import RolloutEngine
from siirl.weight_transport import COLOCATED


@dataclass
class Policy:
    actor: Any
    rollout: RolloutEngine | None
    #: Adaptive or fixed KL-in-reward coefficient of this policy (moves once per step).
    kl_ctrl: Any
    free_cache: bool = False
    #: The rollout records the sampled tokens' log-probs and they serve as the PPO old log-probs
    #: (``actor_rollout_ref.actor.old_log_prob_source``), so the actor skips its extra forward.
    old_log_probs_from_rollout: bool = False
    stale: bool = True
    #: Weight loads so far (the version the colocated transport's tickets carry).
    loads: int = 0
    #: How the actor's weights reach its colocated engine: the registered ``in_place`` transport
    #: (siirl.weight_transport.COLOCATED) streaming into the engine's ``sync_weights``, which buckets them by
    #: its fused layers; None without an engine on this rank.
    weight_sync: WeightSync | None = field(init=False)

    def __post_init__(self) -> None:
        self.weight_sync = None if self.rollout is None else make_weight_sync(
            COLOCATED, load=self.rollout.sync_weights, bucket_mb=None)

    def refresh(self) -> None:
        """Wake the engine and, after this policy's last update, stream the actor's weights in (no disk):
        under LoRA the adapter alone to an engine that serves adapters, else the merged weights."""
        self.rollout.wake_up()
        if self.stale and self.actor is not None:  # a rollout apart from its actor gets weights pushed
            if self.rollout.takes_lora_adapters and getattr(self.actor, "lora", False):
                self.rollout.sync_lora_adapter(*self.actor.lora_adapter())
            else:
                self.loads += 1
                self.weight_sync.send(self.actor.named_parameters_for_sync(), self.loads)
            self.stale = False

    def done(self) -> None:
        """After sampling: free the engine's cache when configured (``rollout.free_cache_engine``)."""
        if self.free_cache:
            self.rollout.sleep()

    def mark_stale(self) -> None:
        self.stale = True

    def checkpoint_target(self) -> Any:
        return self.actor

    def kl_state(self) -> dict[str, float]:
        return {"value": float(self.kl_ctrl.value)}

    def load_kl_state(self, state: dict[str, float]) -> None:
        self.kl_ctrl.value = state["value"]

    def close(self) -> None:
        closer = getattr(self.rollout, "close", None)
        if closer is not None:
            closer()
