"""Rollout with Hugging Face ``generate``: runs on every device family, the CPU included.

The engine keeps its own plain (unsharded) copy of the policy in the compute dtype; after each policy
update the trainer streams its full parameters into it with ``sync_weights`` (in memory, no disk).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any

import torch
from tensordict import TensorDict
from transformers import (
    DynamicCache,
    GenerationConfig,
    LogitsProcessorList,
    PreTrainedTokenizerBase,
    StoppingCriteria,
    StoppingCriteriaList,
    SuppressTokensLogitsProcessor,
)
from transformers.generation.stopping_criteria import StopStringCriteria

from siirl.device.weight_sync.engine_loaders import hf_loader
from siirl.engine.rollout.base import ROLLOUT_ENGINES, ModelRolloutEngine
from siirl.engine.rollout.batch_ops import assemble_sequences, expand_prompts, pad_right, prompt_position_ids
from siirl.engine.rollout.hf_sampling import generation_kwargs, sampling_processors
from siirl.engine.rollout.sampled_log_probs import SampledLogProbs
from siirl.engine.rollout.sampling import SamplingParams
from siirl.engine.rollout.vision_requests import vision_token_ids
from siirl.engine.rollout.vision_rollout import RolloutImages, rollout_images
from siirl.engine.workers.model_loading import load_causal_lm, load_tokenizer, resolve_dtype
from siirl.engine.workers.vision_inputs import MULTIMODAL_INPUTS
from siirl.errors import ConfigError
from siirl.params.model import ModelConfig

logger = logging.getLogger(__name__)


class FinishTracker(StoppingCriteria):
    """Records the step at which each row ends (end-of-sequence token or stop string) and stops it;
    ``pause(finished rows)`` returning True stops the whole call after the current token.

    ``generate`` pads finished rows with the pad id, which may equal the end-of-sequence id, so the
    response length cannot be recovered from the tokens afterwards; this criterion remembers it.
    """

    def __init__(
        self, prompt_width: int, eos_ids: list[int], stop: StopStringCriteria | None, rows: int,
        pause: Callable[[torch.Tensor], bool] | None = None,
    ) -> None:
        self.prompt_width = prompt_width
        self.eos_ids = torch.tensor(eos_ids, dtype=torch.long)
        self.stop, self.pause = stop, pause
        self.finished_at = torch.full((rows,), -1, dtype=torch.long)

    def __call__(
        self, input_ids: torch.LongTensor, scores: torch.FloatTensor, **kwargs: Any
    ) -> torch.BoolTensor:
        step = input_ids.shape[1] - self.prompt_width - 1
        done = torch.isin(input_ids[:, -1].cpu(), self.eos_ids)
        if self.stop is not None:
            done |= self.stop(input_ids, scores).cpu()
        newly = done & (self.finished_at < 0)
        self.finished_at[newly] = step
        finished = self.finished_at >= 0
        if self.pause is not None and self.pause(finished):  # every row stops where it is, unfinished ones too
            return torch.ones_like(finished).to(input_ids.device)
        return finished.to(input_ids.device)

    def lengths(self, generated: int) -> torch.Tensor:
        """Response length per row: up to and including the finishing token, else all generated tokens."""
        return torch.where(
            self.finished_at >= 0, self.finished_at + 1, torch.full_like(self.finished_at, generated)
        )


def _without_common_left_padding(ids: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Drop the leading columns that are padding in every row: prompts are left-padded to the data's
    ``max_prompt_length``, and generate would run the model over those columns for nothing."""
    used = mask.bool().any(0).nonzero()
    first = min(int(used[0]), mask.shape[1] - 1) if len(used) else mask.shape[1] - 1
    return ids[:, first:], mask[:, first:]


def _eos_ids(model: torch.nn.Module, tokenizer: PreTrainedTokenizerBase) -> list[int]:
    ids = model.generation_config.eos_token_id
    ids = [] if ids is None else ([ids] if isinstance(ids, int) else list(ids))
    if tokenizer.eos_token_id is not None and tokenizer.eos_token_id not in ids:
        ids.append(tokenizer.eos_token_id)
    if not ids:
        raise ConfigError("the model defines no end-of-sequence token (generation_config or tokenizer)")
    return ids


@ROLLOUT_ENGINES.register("hf")
class HFRolloutEngine(ModelRolloutEngine):
    """``model_cfg`` / ``rollout_cfg``: ``ModelConfig`` / ``RolloutConfig`` sections; responses are at most
    ``max_response_length`` tokens (``data.max_response_length``)."""

    takes_images = True

    def start(self, model_cfg: ModelConfig, *, local_rank: int, tokenizer: PreTrainedTokenizerBase | None) -> None:
        self.device = self.backend.device(local_rank)
        self.micro_batch_size = int(self.cfg.micro_batch_size)
        self.tokenizer = tokenizer if tokenizer is not None else load_tokenizer(model_cfg)
        self.model = load_causal_lm(
            model_cfg, self.backend, resolve_dtype(str(model_cfg.dtype), self.backend), generation=True
        )
        self.model.requires_grad_(False).eval()
        self.model.to(self.device)
        self.params = dict(self.model.named_parameters(remove_duplicate=False))
        self._loader = hf_loader(self.params)
        self.eos_ids = _eos_ids(self.model, self.tokenizer)
        vision = vision_token_ids(self.model.config)
        # After the log-prob recorder: it records the policy's own distribution, as training computes it.
        self.never_sampled = SuppressTokensLogitsProcessor(vision, device=self.device) if vision else None
        self.pad_id = int(self.tokenizer.pad_token_id)
        self.train_params = SamplingParams.from_config(self.cfg)
        self.val_params = SamplingParams.from_config(self.cfg.val_kwargs)

    # ----- weights and memory -----

    def sync_weights(self, named_tensors: Iterable[tuple[str, torch.Tensor]]) -> None:
        seen = self._loader(named_tensors)  # streamed: one full parameter at a time
        logger.debug("synced %d tensors into the rollout model", seen)

    def sleep(self) -> None:
        if bool(self.cfg.free_cache_engine) and self.device.type != "cpu":
            self.model.to("cpu")
            self.backend.empty_cache()

    def wake_up(self) -> None:
        self.model.to(self.device)

    # ----- generation -----

    def _generation_config(self, params: SamplingParams, max_new_tokens: int) -> GenerationConfig:
        return GenerationConfig(
            **generation_kwargs(params, self.backend.inverse_cdf_sampling),
            max_new_tokens=max_new_tokens,
            eos_token_id=self.eos_ids,
            pad_token_id=self.pad_id,
            use_cache=True,
        )

    @classmethod
    def sampled_log_probs(cls, dtype: torch.dtype) -> str:
        """Exact in float32: the engine's model is the actor's, synced before every rollout, run through
        the same transformers code; in half precision the two paths round differently."""
        return "exact" if dtype == torch.float32 else "approximate"

    def _shared_prompt_cache(
        self, ids: torch.Tensor, mask: torch.Tensor, repeats: int, images: RolloutImages | None
    ) -> DynamicCache:
        """The KV cache of every prompt token but the last, computed once per distinct prompt and repeated
        for its ``repeats`` samples (rows come in runs of identical prompts).

        GRPO draws n responses per prompt and ``generate`` would prefill each copy: n times the prompt's
        compute, most of a short-answer rollout. ``generate`` takes the cache and runs only the last prompt
        token onwards, with the same positions (from the attention mask) and sampling as without it.
        """
        head_ids, head_mask = ids[::repeats, :-1], mask[::repeats, :-1]
        cache = DynamicCache(config=self.model.config)
        inputs = {"position_ids": prompt_position_ids(head_mask)} if images is None else images.prefill_inputs(repeats)
        self.model(
            input_ids=head_ids,
            attention_mask=head_mask,
            past_key_values=cache,
            use_cache=True,
            logits_to_keep=1,
            **inputs,
        )
        cache.batch_repeat_interleave(repeats)
        return cache

    @torch.no_grad()
    def _sample(
        self, prompts: TensorDict, params: SamplingParams, max_new_tokens: int, recorder: SampledLogProbs | None,
        repeats: int, pause: Callable[[torch.Tensor], bool] | None = None,
    ) -> tuple[torch.Tensor, FinishTracker]:
        """The new tokens for ``prompts`` (rows in runs of ``repeats`` identical prompts) and who finished."""
        ids, mask = _without_common_left_padding(prompts["input_ids"], prompts["attention_mask"])
        ids, mask = ids.to(self.device), mask.to(self.device)
        stop = StopStringCriteria(self.tokenizer, self.stop_strings) if self.stop_strings else None
        tracker = FinishTracker(ids.shape[1], self.eos_ids, stop, ids.shape[0], pause)
        images = rollout_images(self.model, prompts, ids, mask)
        share = repeats > 1 and ids.shape[1] > 1 and not (images is not None and images.last_token_is_image())
        shared = {"past_key_values": self._shared_prompt_cache(ids, mask, repeats, images)} if share else {}
        if images is not None:
            shared.update(images.generate_inputs(prefilled=share))
        out = self.model.generate(
            input_ids=ids,
            attention_mask=mask,
            generation_config=self._generation_config(params, max_new_tokens),
            stopping_criteria=StoppingCriteriaList([tracker]),
            logits_processor=LogitsProcessorList([
                *(p for p in (recorder, self.never_sampled) if p is not None),
                *sampling_processors(params, self.backend.inverse_cdf_sampling),
            ]),
            **shared,
        )
        return out[:, ids.shape[1] :].cpu(), tracker

    def _generate_chunk(
        self, prompts: TensorDict, params: SamplingParams, recorder: SampledLogProbs | None, repeats: int
    ) -> dict[str, torch.Tensor]:
        """Generate for ``prompts``, whose rows come in runs of ``repeats`` identical prompts."""
        generated, tracker = self._sample(prompts, params, self.max_response_length, recorder, repeats)
        responses = pad_right(generated, self.max_response_length, self.pad_id)
        lengths = tracker.lengths(generated.shape[1]).clamp(max=self.max_response_length)
        fields = assemble_sequences(prompts.cpu(), responses, lengths, self.pad_id)
        if recorder is not None:
            in_response = fields["response_mask"].to(torch.float32)
            log_probs, entropies = recorder.finish(generated)
            fields["rollout_log_probs"] = pad_right(log_probs, self.max_response_length, 0) * in_response
            fields["rollout_entropys"] = pad_right(entropies, self.max_response_length, 0) * in_response
        return fields

    def continue_sequences(
        self, prompts: TensorDict, max_new_tokens: int, repeats: int = 1,
        pause: Callable[[torch.Tensor], bool] | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
        """At most ``max_new_tokens`` more sampled tokens after each left-padded row of ``prompts`` (the
        prompt plus what was generated so far): ``(tokens, lengths, finished, log_probs, entropies)``, the
        last two None unless the engine records log-probs. A partial rollout generates in such pieces;
        ``pause(finished rows)``, asked after every token, ends the piece early for every row."""
        params = self.train_params
        recorder = SampledLogProbs(params.temperature) if self.records_log_probs and not params.greedy else None
        generated, tracker = self._sample(prompts, params, max_new_tokens, recorder, repeats, pause)
        lengths = tracker.lengths(generated.shape[1])
        log_probs, entropies = recorder.finish(generated) if recorder is not None else (None, None)
        return generated, lengths, tracker.finished_at >= 0, log_probs, entropies

    def generate(self, batch: TensorDict, validate: bool = False) -> TensorDict:
        missing = [k for k in ("input_ids", "attention_mask") if k not in set(batch.keys())]
        if missing:
            raise ValueError(
                f"rollout needs prompt fields {missing} (left-padded input_ids / attention_mask)"
            )
        params = self.val_params if validate else self.train_params
        expanded = expand_prompts(batch, params.n)
        pieces: list[dict[str, torch.Tensor]] = []
        record = self.records_log_probs and not params.greedy
        rows_per_chunk = max(params.n, self.micro_batch_size // params.n * params.n)  # whole prompt groups
        # kept for the output; generate derives positions from the mask
        fields = [
            k for k in ("input_ids", "attention_mask", "position_ids", MULTIMODAL_INPUTS) if k in set(expanded.keys())
        ]
        for start in range(0, expanded.batch_size[0], rows_per_chunk):
            chunk = expanded[start : start + rows_per_chunk].select(*fields)
            recorder = SampledLogProbs(params.temperature) if record else None
            pieces.append(self._generate_chunk(chunk, params, recorder, params.n))
        for key in pieces[0]:
            expanded[key] = torch.cat([piece[key] for piece in pieces])
        return expanded
