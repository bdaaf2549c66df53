"""The rollout-engine contract and the name -> engine registry (``actor_rollout_ref.rollout.name``).

An engine turns a batch of left-padded prompts into a batch of ``n`` responses per prompt and receives
the trainer's weights in memory after every policy update. Adding an engine (vLLM, SGLang, ...) is one
module with a ``@ROLLOUT_ENGINES.register("name")`` class, imported by ``siirl.engine.rollout``.

Output batch contract (``generate``), rows = prompts x n, prompt ``i``'s samples adjacent:

- ``prompts`` (rows, P) left-padded, ``responses`` (rows, R) right-padded with the pad id, R =
  ``max_response_length``;
- ``response_mask`` (rows, R): 1 up to and including the end-of-sequence token, 0 after;
- ``input_ids`` / ``attention_mask`` / ``position_ids`` (rows, P + R) of the full sequences;
- every input field repeated per sample, and a ``uid`` per prompt (kept if present).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable
from typing import Any

import torch
from tensordict import TensorDict

from siirl.device import DeviceBackend, get_backend
from siirl.registry import Registry


class RolloutEngine(ABC):
    """Generates responses for a batch of prompts and takes the trainer's weights after each update."""

    #: Set by the worker when the PPO old log-probs come from the rollout: sampling then also writes
    #: ``rollout_log_probs`` (rows, R), 0 past each response, and ``rollout_entropys`` alike where the
    #: engine sees the whole distribution (hf; vLLM returns the sampled tokens' log-probs only).
    records_log_probs: bool = False
    #: The engine serves the policy's LoRA adapter over its own copy of the base weights
    #: (``sync_lora_adapter``) rather than taking merged full weights (``sync_weights``).
    takes_lora_adapters: bool = False
    #: The largest adapter rank the engine serves (None: no bound), checked before Ray.
    largest_lora_rank: int | None = None
    #: The engine passes a vision-language policy its rows' images (``multi_modal_inputs``).
    takes_images: bool = False
    #: The engine runs in the DAG worker's process and makes process groups over the whole DAG world (vLLM's
    #: external launcher and its world group); on rollout ranks of their own (``apart``) it runs in processes
    #: of its own instead, one engine per rank, so its tensor parallelism cannot span DAG workers there.
    spans_dag_world: bool = False

    @classmethod
    def sampled_log_probs(cls, dtype: torch.dtype) -> str:
        """How the log-probs this engine could record while sampling compare with the actor's recomputation
        in ``dtype``: ``exact``, ``approximate`` or ``unsupported`` (the engine records none)."""
        return "unsupported"

    @classmethod
    def check_rollout_config(cls, rollout_cfg: Any) -> None:
        """Refuse, as one ``ConfigError`` line, rollout settings this engine cannot run; called by the config
        checks before Ray starts (``siirl.engine.rollout.choice``), the one place that calls it."""

    @abstractmethod
    def generate(self, batch: TensorDict, validate: bool = False) -> TensorDict:
        """Responses for the prompts of ``batch`` (see the module docstring); ``validate`` switches to
        the validation sampling parameters (``rollout.val_kwargs``)."""

    @abstractmethod
    def sync_weights(self, named_tensors: Iterable[tuple[str, torch.Tensor]]) -> None:
        """Copy full parameters (HF names) into the engine's model, without touching disk."""

    def sync_lora_adapter(self, config: Any, tensors: dict[str, torch.Tensor]) -> None:
        """Serve the adapter (a peft ``LoraConfig`` and its tensors under peft's saved names) from now on."""
        raise NotImplementedError(f"{type(self).__name__} takes merged weights (sync_weights), not LoRA adapters")

    @abstractmethod
    def sleep(self) -> None:
        """Release device memory (weights, KV cache) while the trainer uses the device."""

    @abstractmethod
    def wake_up(self) -> None:
        """Take the device memory back before the next ``generate`` / ``sync_weights``."""

    def rollout_metrics(self, out: TensorDict) -> dict[str, float]:
        """Engine-specific metrics of one ``generate`` output (environment success, turns, ...)."""
        return {}


class ModelRolloutEngine(RolloutEngine):
    """An engine that loads its own copy of the policy from the model section (hf, vLLM, SGLang); engines that
    wrap another engine (an environment session) keep their own constructors."""

    def __init__(
        self,
        model_cfg: Any,
        rollout_cfg: Any,
        backend: DeviceBackend | str,
        *,
        max_response_length: int,
        local_rank: int = 0,
        tokenizer: Any = None,
        apart: bool = False,
    ) -> None:
        """``model_cfg`` / ``rollout_cfg``: the ``ModelConfig`` / ``RolloutConfig`` sections; responses are at
        most ``max_response_length`` tokens (``data.max_response_length``, >= 1 by its rule); ``local_rank`` is
        the device index this process uses; ``tokenizer`` (else loaded from the model); ``apart``: built on
        rollout ranks of their own (``separate_async``), where the trainer ranks build no engine to form groups
        with. The engine builds itself (:meth:`start`); its settings were vetted by
        :meth:`check_rollout_config` before Ray started."""
        self.backend = get_backend(backend) if isinstance(backend, str) else backend
        self.cfg = rollout_cfg
        self.apart = apart
        self.max_response_length = max_response_length
        self.stop_strings = [str(s) for s in (rollout_cfg.stop or [])]
        self.start(model_cfg, local_rank=local_rank, tokenizer=tokenizer)

    @abstractmethod
    def start(self, model_cfg: Any, *, local_rank: int, tokenizer: Any) -> None:
        """Load the engine's model and tokenizer."""


ROLLOUT_ENGINES: Registry[type[RolloutEngine]] = Registry(
    "rollout engine", config_keys=("actor_rollout_ref.rollout.name",)
)


def make_rollout_engine(name: str, **kwargs: Any) -> RolloutEngine:
    """Build the engine registered as ``name`` with the engine's own constructor arguments."""
    return ROLLOUT_ENGINES.get(name)(**kwargs)
