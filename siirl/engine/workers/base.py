"""What the actor, reference and critic workers share: an HF model spread over a data-parallel group
(FSDP2-sharded or replicated, see ``parallel_strategy``), padding-free forward passes over micro-batches,
and the mini-batch / micro-batch update loop.

An update talks to its peers a fixed number of times, not once per micro-batch: one all-reduce checks
the row counts, one gathers every mini-batch's token counts, one per optimizer step averages gradients
(replicated models; FSDP reduces inside backward) and one combines all the metrics at the end.
"""

from __future__ import annotations

import contextlib
import logging
import math
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
from tensordict import TensorDict
from torch import nn

from siirl.algorithms import logprobs_from_logits
from siirl.device import DeviceBackend, get_backend
from siirl.device.kernels.hf_models import set_text_attn_implementation, text_config
from siirl.engine.workers.distributed import DataParallelGroup
from siirl.engine.workers.micro_batch import Batching, plan_micro_batches
from siirl.engine.workers.model_loading import resolve_dtype
from siirl.engine.workers.offload import OptimizerStateOffload
from siirl.engine.workers.padding_free import (
    HeadReduce,
    choose_layout,
    prompt_groups,
    response_outputs,
    supports_logits_to_keep,
)
from siirl.engine.workers.parallel_strategy import build_strategy, count_parameters
from siirl.engine.workers.stage_timer import StageTimer
from siirl.engine.workers.ulysses import ULYSSES_ATTENTION, SequenceParallel, sequence_parallel_for
from siirl.engine.workers.vision_inputs import MULTIMODAL_INPUTS, vision_rows
from siirl.params.fsdp import FSDPConfig, host_offload
from siirl.params.micro_batch_keys import micro_batching
from siirl.params.model import ActorConfig, CriticConfig, ModelConfig, RefConfig, RolloutConfig

logger = logging.getLogger(__name__)

FORWARD_KEYS = ("input_ids", "attention_mask", "position_ids", "responses")
ModelLoader = Callable[[Any, DeviceBackend, torch.dtype], nn.Module]


@dataclass(frozen=True)
class LossScale:
    """Whole-mini-batch counts that make micro-batch losses sum (and rank-average) to the mini-batch loss."""

    global_token_count: int
    global_seq_count: int
    dp_size: int

    def kwargs(self) -> dict[str, int]:
        return {
            "global_token_count": self.global_token_count,
            "global_seq_count": self.global_seq_count,
            "dp_size": self.dp_size,
        }


@dataclass
class MicroLoss:
    """A micro-batch's differentiable loss, its additive metrics (loss terms already scaled by
    ``LossScale``: summed over micro-batches, averaged over ranks) and its per-token averages (clip
    fractions, means: combined weighted by valid tokens, so they do not depend on the micro-batching)."""

    loss: torch.Tensor
    summed: dict[str, torch.Tensor | float]
    averaged: dict[str, torch.Tensor | float]


@dataclass(frozen=True)
class _OptimizerStep:
    """What every mini-batch step of one ``run_updates`` call does the same way."""

    keys: tuple[str, ...]
    batching: Batching
    optimizer: torch.optim.Optimizer
    grad_clip: float
    micro_loss: Callable[[TensorDict, LossScale], MicroLoss]


def train_batching(config: ActorConfig | CriticConfig) -> Batching:
    """Micro-batching of an update from ``use_dynamic_bsz`` / ``ppo_micro_batch_size_per_gpu`` /
    ``ppo_max_token_len_per_gpu`` (ActorConfig, CriticConfig)."""
    size, dynamic = micro_batching(config.ppo_micro_batch_size_per_gpu, config.use_dynamic_bsz)
    return Batching(use_dynamic_bsz=dynamic, micro_batch_size=size, max_token_len=int(config.ppo_max_token_len_per_gpu))


def log_prob_batching(config: RolloutConfig | RefConfig) -> Batching:
    """Micro-batching of a forward pass from the ``log_prob_*`` keys (RolloutConfig, RefConfig)."""
    size, dynamic = micro_batching(config.log_prob_micro_batch_size_per_gpu, config.log_prob_use_dynamic_bsz)
    return Batching(
        use_dynamic_bsz=dynamic, micro_batch_size=size, max_token_len=int(config.log_prob_max_token_len_per_gpu)
    )


def check_keys(batch: TensorDict, keys: tuple[str, ...], caller: str) -> None:
    present = set(batch.keys())
    missing = [k for k in keys if k not in present]
    if missing:
        raise ValueError(f"{caller} needs batch keys {missing} (has {sorted(present)})")


def _model_inputs(batch: TensorDict, keys: tuple[str, ...]) -> TensorDict:
    """The fields a forward or an update reads (``keys``, plus images where the rows have them): slicing them
    alone skips copying the batch's other fields (prompts' text, ground truths) per mini- and micro-batch."""
    return batch.select(*keys, *(k for k in (MULTIMODAL_INPUTS,) if k in set(batch.keys())))


def _as_floats(values: list[torch.Tensor | float]) -> list[float]:
    """Python floats of scalar tensors and numbers, with ONE device-to-host copy for all the tensors.

    A ``.item()`` per metric per micro-batch would make the host wait for the accelerator's queue to
    drain every time, so no kernels are queued ahead while the next micro-batch is prepared.
    """
    tensors = [v.detach().reshape(()).to(torch.float64) for v in values if isinstance(v, torch.Tensor)]
    on_host = iter(torch.stack(tensors).tolist() if tensors else [])
    return [next(on_host) if isinstance(v, torch.Tensor) else float(v) for v in values]


def _enable_activation_checkpointing(model: nn.Module) -> None:
    """Recompute each block's activations in backward (non-reentrant: required under FSDP2)."""
    kwargs = {"use_reentrant": False}
    if hasattr(model, "activation_checkpointing_enable"):  # transformers >= 5
        model.activation_checkpointing_enable(activation_checkpointing_kwargs=kwargs)
    else:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)


class FSDPWorker:
    """An HF model over the worker's data-parallel group: ``fully_shard``-ed or replicated (``strategy``),
    sharded, placed and typed as its ``fsdp_config`` section (``fsdp``) says."""

    def __init__(
        self,
        model_cfg: ModelConfig,
        backend: DeviceBackend | str,
        loader: ModelLoader,
        *,
        trainable: bool,
        process_group: dist.ProcessGroup | None = None,
        local_rank: int = 0,
        fsdp: FSDPConfig | None = None,
        init_seed: int = 0,
        strategy: str = "auto",
        sp_group: dist.ProcessGroup | None = None,
    ) -> None:
        self.backend = get_backend(backend) if isinstance(backend, str) else backend
        self.backend.set_device(local_rank)
        self.device = self.backend.device(local_rank)
        self.dp = DataParallelGroup(process_group, self.device)
        self.fsdp = fsdp = fsdp or FSDPConfig()
        self.compute_dtype = resolve_dtype(str(model_cfg.dtype if fsdp.dtype == "auto" else fsdp.dtype), self.backend)
        # Trainable models keep fp32 master weights unless model_dtype says otherwise; FSDP (or autocast)
        # casts them to compute_dtype per forward.
        default_param_dtype = torch.float32 if trainable else self.compute_dtype
        param_dtype = default_param_dtype if fsdp.model_dtype == "auto" else resolve_dtype(fsdp.model_dtype, self.backend)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(init_seed)  # new heads get the same initial values on every rank
            model = loader(model_cfg, self.backend, param_dtype)
        if trainable and bool(model_cfg.enable_gradient_checkpointing):
            _enable_activation_checkpointing(model)
        self.offload_activations = trainable and bool(model_cfg.enable_activation_offload) and self.device.type != "cpu"
        model.train(trainable)
        if not trainable:
            model.requires_grad_(False)
        language = text_config(model)
        layer_types = set(getattr(language, "layer_types", None) or ["full_attention"])
        sequence_parallel = sp_group is not None and dist.get_world_size(sp_group) > 1
        self.layout, attn = choose_layout(
            bool(model_cfg.use_remove_padding),
            "packed" if sequence_parallel else str(model_cfg.remove_padding_layout),
            str(language._attn_implementation),
            full_causal=layer_types == {"full_attention"},
        )
        #: This rank's Ulysses sequence-parallel group (``ulysses_sequence_parallel_size`` > 1), else None.
        self.sp: SequenceParallel | None = None
        if sequence_parallel:
            self.sp = sequence_parallel_for(sp_group, self.layout, attn)
            attn = ULYSSES_ATTENTION
        #: Whether this rank writes what its sp group shares (its dp rank's checkpoint shard, exports).
        self.sp_leader = self.sp is None or self.sp.rank == 0
        if attn != language._attn_implementation:
            set_text_attn_implementation(model, attn)
        self.logits_to_keep = supports_logits_to_keep(model)
        fused = self.backend.fused_log_probs() if bool(model_cfg.use_fused_kernels) else None
        self.log_probs_fn = fused or logprobs_from_logits
        self.strategy = build_strategy(strategy, model, self.dp, self.compute_dtype, trainable, host_offload(fsdp))
        self.model = self.strategy.wrap(model, self.device, fsdp)
        #: Set by trainable workers with ``optimizer_offload`` (``offload_optimizer_state``).
        self.state_offload: OptimizerStateOffload | None = None
        self.update_count = 0
        #: Updates in a row whose every optimiser step was skipped for a non-finite gradient norm.
        self.nonfinite_streak = 0
        self._skip_logged = False
        self.timer = StageTimer()
        logger.info(
            "%s ready: strategy=%s (%d parameters) layout=%s attn=%s dp=%d sp=%d", type(self).__name__,
            self.strategy.name, count_parameters(self.model), self.layout, attn, self.dp.size,
            self.sp.size if self.sp else 1,
        )

    # ----- forward -----

    def activation_offload(self) -> contextlib.AbstractContextManager:
        """Where a training forward keeps what backward needs: host memory with ``enable_activation_offload``
        (verl's key) when the device is not the host itself, else the device."""
        if self.offload_activations and torch.is_grad_enabled():
            return torch.autograd.graph.save_on_cpu(pin_memory=self.device.type != "cpu")
        return contextlib.nullcontext()

    def forward_micro_batch(self, micro: TensorDict, reduce: HeadReduce) -> torch.Tensor:
        """``reduce``'d head outputs at the response tokens of one micro-batch: ``(rows, R, ...)``."""
        with self.strategy.forward_context(), self.activation_offload():
            return response_outputs(
                self.model,
                micro["input_ids"],
                micro["attention_mask"],
                micro["position_ids"],
                micro["responses"].shape[1],
                self.layout,
                reduce,
                self.logits_to_keep,
                vision_rows(self.model, micro, micro["input_ids"], micro["attention_mask"]),
                self.sp,
            )

    def micro_batches(self, batch: TensorDict, batching: Batching) -> list[list[int]]:
        mask = batch["attention_mask"]
        seqlens = mask.sum(-1).tolist()
        agree = self.dp if self.strategy.lockstep_micro_batches else None
        groups = prompt_lens = None
        if self.layout == "shared":  # plan prompt groups together: each micro-batch runs a prompt once
            response_len = batch["responses"].shape[1]
            groups = prompt_groups(batch["input_ids"], mask, response_len).tolist()
            prompt_lens = mask[:, : mask.shape[1] - response_len].sum(-1).tolist()
        return plan_micro_batches(seqlens, mask.shape[1], self.layout, batching, agree, groups, prompt_lens)

    def iter_micro_batches(
        self, batch: TensorDict, keys: tuple[str, ...], batching: Batching
    ) -> Iterator[tuple[list[int], TensorDict, bool]]:
        """(rows, device micro-batch, is_dummy); a dummy reruns row 0 so that FSDP collectives line up."""
        if batch.batch_size[0] == 0:
            raise ValueError(f"{type(self).__name__} got an empty batch on dp rank {self.dp.rank}")
        view = _model_inputs(batch, keys)
        for rows in self.micro_batches(batch, batching):
            dummy = not rows
            with self.timer.phase("data_movement"):
                index = torch.tensor(rows or [0], dtype=torch.long)
                micro = view[index].to(self.device)
            yield rows, micro, dummy

    @torch.no_grad()
    def forward_batch(self, batch: TensorDict, batching: Batching, reduce: HeadReduce) -> torch.Tensor:
        """Per-response-token outputs for the whole batch, in its row order, on the batch's device."""
        check_keys(batch, FORWARD_KEYS, type(self).__name__)
        out_device = batch["input_ids"].device
        result: torch.Tensor | None = None
        for rows, micro, dummy in self.iter_micro_batches(batch, FORWARD_KEYS, batching):
            values = self.forward_micro_batch(micro, reduce)
            if dummy:
                continue
            if result is None:
                result = values.new_zeros((batch.batch_size[0], *values.shape[1:]), device=out_device)
            result[torch.tensor(rows, dtype=torch.long)] = values.to(out_device)
        self.strategy.after_forward_only(self.model)
        assert result is not None  # a non-empty batch has at least one real micro-batch
        return result

    # ----- training -----

    def offload_optimizer_state(self, optimizer: torch.optim.Optimizer) -> None:
        """Keep ``optimizer``'s state off the device between updates when ``optimizer_offload`` asks for it
        (host parameter offload has it on the host already)."""
        if self.fsdp.optimizer_offload and not host_offload(self.fsdp):
            self.state_offload = OptimizerStateOffload(optimizer, self.device)

    def mini_batch_rows(self, ppo_mini_batch_size: int, rollout_n: int) -> int:
        """Per-rank rows of one optimiser step: ``ppo_mini_batch_size`` prompts x n over the dp group (at least
        one each: ``siirl.preflight.check_batch_sizes`` holds the plan to it)."""
        return ppo_mini_batch_size * rollout_n // self.dp.size

    def _mini_batches(self, rows: int, mini_rows: int, epochs: int, shuffle: bool) -> list[torch.Tensor]:
        """Row indices of every optimizer step of the update, in order (the same on every rank)."""
        minis = []
        for epoch in range(epochs):
            order = None
            if shuffle:  # the same permutation on every rank, a new one every epoch and update
                seed = self.update_count * max(epochs, 1) + epoch
                order = torch.randperm(rows, generator=torch.Generator().manual_seed(seed))
            for start in range(0, rows, mini_rows):
                index = torch.arange(start, min(start + mini_rows, rows))
                minis.append(order[index] if order is not None else index)
        return minis

    def run_updates(
        self,
        batch: TensorDict,
        *,
        keys: tuple[str, ...],
        mini_rows: int,
        epochs: int,
        shuffle: bool,
        batching: Batching,
        optimizer: torch.optim.Optimizer,
        grad_clip: float,
        micro_loss: Callable[[TensorDict, LossScale], MicroLoss],
        prefix: str,
    ) -> dict[str, float]:
        """``epochs`` passes of mini-batch optimiser steps with gradient accumulation over micro-batches.

        Besides the loss metrics (``{prefix}/...``) it reports where the time went:
        ``timing_s/update_{prefix}/{forward,backward,optimizer,collectives,data_movement,host}``.
        """
        self.timer.start()
        check_keys(batch, keys, type(self).__name__)
        rows = batch.batch_size[0]
        with self.timer.phase("collectives"):
            low, high = self.dp.min_max_int(rows)
        if low != high or rows == 0:
            raise ValueError(
                f"every data-parallel rank must train on the same non-zero number of rows, got {low}..{high}"
            )
        minis = self._mini_batches(rows, mini_rows, epochs, shuffle)
        if self.state_offload is not None:
            with self.timer.phase("data_movement"):
                self.state_offload.load()
        mask = batch["response_mask"]
        with self.timer.phase("collectives"):  # the loss scales of every optimizer step at once
            counts = self.dp.sum_ints([c for index in minis for c in (int(mask[index].sum().item()), len(index))])
        step, steps = _OptimizerStep(keys, batching, optimizer, grad_clip, micro_loss), []
        inputs = _model_inputs(batch, keys)
        for k, index in enumerate(minis):
            with self.timer.phase("data_movement"):
                mini = inputs[index]
            scale = LossScale(max(counts[2 * k], 1), counts[2 * k + 1], self.dp.size)
            steps.append(self._mini_batch_step(mini, step, scale))
        if self.state_offload is not None:
            with self.timer.phase("data_movement"):
                self.state_offload.offload()
        self.update_count += 1
        skipped = sum(not math.isfinite(step["grad_norm"]) for step in steps)
        self.nonfinite_streak = self.nonfinite_streak + 1 if steps and skipped == len(steps) else 0
        metrics = self._combine_step_metrics(steps, prefix)
        metrics[f"{prefix}/skipped_updates"] = float(skipped)
        metrics[f"{prefix}/lr"] = optimizer.param_groups[0]["lr"]
        metrics.update(self.timer.metrics(f"timing_s/update_{prefix}"))
        return metrics

    def _combine_step_metrics(self, steps: list[dict[str, Any]], prefix: str) -> dict[str, float]:
        """Every optimizer step's metrics summed over ranks in ONE all-reduce, then averaged over steps."""
        flat: list[float] = []
        for step in steps:
            flat += [step["summed"][k] for k in sorted(step["summed"])]
            flat += [step["weighted"][k] for k in sorted(step["weighted"])] + [step["weight"]]
        with self.timer.phase("collectives"):
            totals = self.dp.sum_floats(flat)
        history: dict[str, list[float]] = defaultdict(list)
        offset = 0
        for step in steps:
            sum_keys, avg_keys = sorted(step["summed"]), sorted(step["weighted"])
            block = totals[offset : offset + len(sum_keys) + len(avg_keys) + 1]
            offset += len(block)
            for key, value in zip(sum_keys, block):
                history[key].append(value / self.dp.size)
            for key, value in zip(avg_keys, block[len(sum_keys) :]):
                history[key].append(value / max(block[-1], 1.0))
            history["grad_norm"].append(step["grad_norm"])
        # A key naming its own namespace (verl's ``rollout_corr/*`` from the bypass loss) keeps it.
        return {key if "/" in key else f"{prefix}/{key}": sum(values) / len(values) for key, values in history.items()}

    def _mini_batch_step(self, mini: TensorDict, step: _OptimizerStep, scale: LossScale) -> dict[str, Any]:
        """Accumulate gradients over the micro-batches and step; returns this rank's metric sums."""
        # Accumulated where they are computed (device tensors or floats); read back once per mini-batch.
        summed: dict[str, torch.Tensor | float] = defaultdict(float)
        weighted: dict[str, torch.Tensor | float] = defaultdict(float)  # token-weighted sums of averaged metrics
        weight: torch.Tensor | float = 0.0
        for _, micro, dummy in self.iter_micro_batches(mini, step.keys, step.batching):
            with self.timer.phase("forward"):
                result = step.micro_loss(micro, scale)
            with self.timer.phase("backward"):
                (result.loss * (0.0 if dummy else 1.0)).backward()
            if dummy:
                continue
            tokens_here = micro["response_mask"].sum()
            weight = weight + tokens_here
            for key, value in result.summed.items():
                summed[key] = summed[key] + (value.detach() if isinstance(value, torch.Tensor) else value)
            for key, value in result.averaged.items():
                detached = value.detach() if isinstance(value, torch.Tensor) else value
                weighted[key] = weighted[key] + tokens_here * detached
        with self.timer.phase("collectives"):
            self.strategy.reduce_gradients(self.model)
            if self.sp is not None:
                self.sp.reduce_gradients(self.model, self.device)
        with self.timer.phase("optimizer"):
            grad_norm = self._optimizer_step(step.optimizer, step.grad_clip)
        sum_keys, avg_keys = sorted(summed), sorted(weighted)
        values = _as_floats([summed[k] for k in sum_keys] + [weighted[k] for k in avg_keys] + [weight])
        return {
            "summed": dict(zip(sum_keys, values)),
            "weighted": dict(zip(avg_keys, values[len(sum_keys) : -1])),
            "weight": values[-1],
            "grad_norm": grad_norm,
        }

    def _optimizer_step(self, optimizer: torch.optim.Optimizer, grad_clip: float) -> float:
        max_norm = grad_clip if grad_clip > 0 else math.inf
        grad_norm = self.strategy.clip_grad_norm(self.model, max_norm)
        if math.isfinite(grad_norm):
            optimizer.step()
        elif not self._skip_logged:  # once per worker: the metric counts the rest
            self._skip_logged = True
            logger.warning(
                "%s: grad norm is %s, skipping this optimiser step (further skips are counted in the "
                "*/skipped_updates metric, not logged)", type(self).__name__, grad_norm
            )
        optimizer.zero_grad(set_to_none=True)
        return grad_norm
