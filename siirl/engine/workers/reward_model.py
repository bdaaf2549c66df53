"""The reward model: a sequence classifier's scalar score of each prompt + response, written at the
response's last token (verl's ``rm_scores``), zeros elsewhere.

It runs forward only, through the same machinery as the reference policy: sharded or replicated
(``reward_model.strategy``), micro-batched by token budget and padding-free. Two details make a sequence
classifier fit that machinery:

- Hugging Face pools a classifier at the rightmost non-pad token of each row, which is meaningless for a
  packed row holding many sequences. ``TokenScores`` drops the pooling and returns the score head at the
  positions the layout asks for, like a token classifier.
- The layouts return the head at the position *before* each attended response token (the position that
  predicts it). One extra attended token after each sequence's last makes the last real token such a
  position; causal attention keeps the extra token out of every earlier position, so the scores are
  those of the plain padded forward.

When the policy's tokenizer differs from the reward model's (``reward_model.model.input_tokenizer``), the
response is decoded with the policy's tokenizer and the chat re-rendered with the reward model's chat
template before scoring, as verl does.
"""

from __future__ import annotations

import logging
from types import SimpleNamespace
from typing import Any

import torch
import torch.distributed as dist
import torch.nn.functional as F
from tensordict import TensorDict
from torch import nn
from transformers import PreTrainedModel, PreTrainedTokenizerBase
from transformers.modeling_outputs import TokenClassifierOutput

from siirl.data_coordinator.tensordict_ops import row_values
from siirl.device import DeviceBackend
from siirl.engine.workers.base import FSDPWorker, check_keys
from siirl.engine.workers.micro_batch import Batching
from siirl.engine.workers.model_loading import ModelLoadError, load_sequence_classifier, load_tokenizer
from siirl.errors import ConfigError
from siirl.tasks.evaluation import left_pad

logger = logging.getLogger(__name__)

SCORE_KEYS = ("input_ids", "attention_mask", "position_ids", "responses")


class TokenScores(nn.Module):
    """A sequence classifier without its pooling: the ``score`` head at the requested positions."""

    def __init__(self, classifier: PreTrainedModel) -> None:
        super().__init__()
        self.classifier = classifier
        self.config = classifier.config
        # FSDP2 shards each of these blocks as its own unit (see ``fsdp.shard_model``).
        self._no_split_modules = classifier._no_split_modules

    def set_attn_implementation(self, name: str) -> None:
        self.classifier.set_attn_implementation(name)

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None,
        position_ids: torch.Tensor,
        logits_to_keep: torch.Tensor,
        **kwargs: Any,
    ) -> TokenClassifierOutput:
        hidden = self.classifier.base_model(
            input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids, **kwargs
        ).last_hidden_state
        return TokenClassifierOutput(logits=self.classifier.score(hidden.index_select(1, logits_to_keep)))


def load_token_scores(model_cfg: Any, backend: DeviceBackend, dtype: torch.dtype) -> TokenScores:
    return TokenScores(load_sequence_classifier(model_cfg, backend, dtype))


def _score_reduce(head: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    return head[:, 0].float()


def last_attended(attention_mask: torch.Tensor) -> torch.Tensor:
    """Column of each row's last attended token (rows are contiguous: left-padded prompt, right-padded
    response)."""
    width = attention_mask.shape[1]
    return width - 1 - attention_mask.flip(-1).argmax(-1)


def with_token_after_last(
    input_ids: torch.Tensor, attention_mask: torch.Tensor, position_ids: torch.Tensor, prompt_width: int
) -> TensorDict:
    """The rows one column wider, each with one more attended token right after its last (see the module
    docstring), as the forward keys with the response region widened by that column."""
    rows = torch.arange(input_ids.shape[0], device=input_ids.device)
    after = last_attended(attention_mask) + 1
    ids, mask, pos = (F.pad(t, (0, 1)) for t in (input_ids, attention_mask, position_ids))
    mask[rows, after] = 1
    pos[rows, after] = position_ids[rows, after - 1] + 1
    return TensorDict(
        {"input_ids": ids, "attention_mask": mask, "position_ids": pos, "responses": ids[:, prompt_width:]},
        batch_size=[input_ids.shape[0]],
    )


def _same_tokenizer(a: PreTrainedTokenizerBase, b: PreTrainedTokenizerBase) -> bool:
    return a.get_vocab() == b.get_vocab() and a.chat_template == b.chat_template


class RewardModelWorker(FSDPWorker):
    """Forward-only reward model over the worker's data-parallel group; ``rm_cfg`` is a
    ``RewardModelConfig`` node (``reward_model.*``)."""

    def __init__(
        self,
        rm_cfg: Any,
        backend: DeviceBackend | str,
        *,
        process_group: dist.ProcessGroup | None = None,
        local_rank: int = 0,
    ) -> None:
        model_cfg = rm_cfg.model
        if not str(model_cfg.path or ""):
            raise ModelLoadError(
                "reward_model.model.path is empty: set it to a local Hugging Face sequence-classification "
                "model dir (reward_model.enable=true scores responses with it)"
            )
        try:
            super().__init__(
                model_cfg,
                backend,
                load_token_scores,
                trainable=False,
                process_group=process_group,
                local_rank=local_rank,
                strategy=str(rm_cfg.strategy),
                fsdp=model_cfg.fsdp_config,
            )
        except ModelLoadError as exc:
            raise ModelLoadError(f"reward_model.model.path: {exc}") from None
        try:
            self.tokenizer, self.input_tokenizer = self._tokenizers(model_cfg)
        except ModelLoadError as exc:
            raise ModelLoadError(f"reward_model.model (tokenizer_path / input_tokenizer): {exc}") from None
        self.batching = Batching(
            use_dynamic_bsz=bool(rm_cfg.use_dynamic_bsz),
            micro_batch_size=int(rm_cfg.micro_batch_size_per_gpu),
            max_token_len=int(rm_cfg.forward_max_token_len_per_gpu),
        )
        self.max_length = rm_cfg.max_length

    @staticmethod
    def _tokenizers(model_cfg: Any) -> tuple[PreTrainedTokenizerBase | None, PreTrainedTokenizerBase | None]:
        """(reward model's tokenizer, policy's tokenizer), both None when the token ids are scored as they are."""
        if not str(model_cfg.input_tokenizer or ""):
            return None, None
        own = load_tokenizer(model_cfg)
        policy = load_tokenizer(
            SimpleNamespace(
                tokenizer_path=model_cfg.input_tokenizer,
                path="",
                trust_remote_code=model_cfg.trust_remote_code,
            )
        )
        if _same_tokenizer(own, policy):
            logger.info("reward_model.model.input_tokenizer matches the reward model's: scoring token ids")
            return None, None
        return own, policy

    def compute_rm_score(self, batch: TensorDict) -> torch.Tensor:
        """``(B, R)`` float32 scores: each row's score at its last response token, 0 elsewhere (all 0 for an
        empty response)."""
        check_keys(batch, SCORE_KEYS, type(self).__name__)
        self.model.eval()
        response_width = batch["responses"].shape[1]
        prompt_width = batch["input_ids"].shape[1] - response_width
        if self.input_tokenizer is None:
            scores = self._last_token_scores(
                batch["input_ids"], batch["attention_mask"], batch["position_ids"], prompt_width
            )
        else:
            ids, mask, pos = self._rerendered(batch, prompt_width)
            scores = self._last_token_scores(ids, mask, pos, ids.shape[1] - 1)
        last = last_attended(batch["attention_mask"]) - prompt_width
        placed = torch.zeros(last.shape[0], response_width, dtype=torch.float32, device=last.device)
        rows = (last >= 0).nonzero().squeeze(1)
        placed[rows, last[rows]] = scores[rows].to(placed.device)
        return placed

    def _last_token_scores(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        position_ids: torch.Tensor,
        prompt_width: int,
    ) -> torch.Tensor:
        """``(B,)``: the score head at each row's last attended token. A row whose last token lies in the
        prompt region gets its last prompt token's score instead, which the caller drops."""
        inputs = with_token_after_last(input_ids, attention_mask, position_ids, prompt_width)
        per_token = self.forward_batch(inputs, self.batching, _score_reduce)
        column = (last_attended(attention_mask) - prompt_width + 1).clamp(min=0)
        return per_token.gather(1, column.to(per_token.device)[:, None])[:, 0]

    def _rerendered(
        self, batch: TensorDict, prompt_width: int
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The chats re-rendered with the reward model's template and tokenizer, left-padded (ids, mask,
        positions); cut from the left to ``max_length`` so that the response and its last token stay."""
        if "raw_prompt" not in set(batch.keys()):
            raise ConfigError(
                "reward_model.model.input_tokenizer re-renders each chat from the batch's raw_prompt "
                "messages: set data.return_raw_chat=true"
            )
        assert self.tokenizer is not None and self.input_tokenizer is not None
        responses = batch["responses"].cpu()
        response_mask = batch["attention_mask"][:, prompt_width:].bool().cpu()
        sequences = []
        for messages, ids, valid in zip(row_values(batch, "raw_prompt"), responses, response_mask):
            text = self.input_tokenizer.decode(ids[valid].tolist(), skip_special_tokens=True)
            chat = [{"role": m["role"], "content": m["content"]} for m in messages]
            chat.append({"role": "assistant", "content": text})
            rendered = self.tokenizer.apply_chat_template(chat, tokenize=False, add_generation_prompt=False)
            tokens = self.tokenizer(rendered, add_special_tokens=False)["input_ids"]
            sequences.append(tokens[-self.max_length :] if self.max_length else tokens)
        return left_pad(sequences, int(self.tokenizer.pad_token_id))
