"""Chat-template rendering, tokenization and left padding of prompts.

Prompts are rendered to text with the generation prompt appended and then tokenized without special
tokens: the template already placed every special token it wants, and adding BOS a second time would
shift every position the model saw during SFT.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import torch

from siirl.data_coordinator.errors import DataError, PromptTooLongError
from siirl.data_coordinator.images import ImagePrompts
from siirl.registry import Registry

Describe = Callable[[int], str]
#: (width, height) of each image of each prompt, for ``<image>`` expansion.
ImageSizes = Sequence[Sequence[tuple[int, int]]]

#: How an over-long prompt is cut to ``data.max_prompt_length`` (``error``: it is refused instead).
TRUNCATIONS: Registry[Callable[[list[int], int], list[int]]] = Registry(
    "prompt truncation", config_keys=("data.truncation",), also_allowed=("error",)
)
TRUNCATIONS.add("left", lambda ids, max_len: ids[len(ids) - max_len :])
TRUNCATIONS.add("right", lambda ids, max_len: ids[:max_len])


class PromptEncoder:
    """Turns ``prompt`` cells (chat messages or plain text) into left-padded token tensors; with ``images``
    (a vision model's image processor), ``<image>`` placeholders become the images' vision tokens."""

    def __init__(
        self,
        tokenizer: Any,
        max_prompt_length: int,
        truncation: str,
        apply_chat_template: bool,
        chat_template_kwargs: Mapping[str, Any] | None = None,
        images: ImagePrompts | None = None,
    ) -> None:
        if max_prompt_length < 1:
            raise DataError(f"data.max_prompt_length must be >= 1, got {max_prompt_length}")
        TRUNCATIONS.check_config("data.truncation", truncation)
        pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        if pad_id is None:
            raise DataError("the tokenizer has neither a pad token nor an eos token to pad prompts with")
        if apply_chat_template and not getattr(tokenizer, "chat_template", None):
            raise DataError("data.apply_chat_template=true but the tokenizer has no chat_template")
        self.tokenizer = tokenizer
        self.max_prompt_length = max_prompt_length
        self.truncation = truncation
        self.apply_chat_template = apply_chat_template
        #: ``data.apply_chat_template_kwargs``: what the template reads besides the messages.
        self.chat_template_kwargs = dict(chat_template_kwargs or {})
        self.pad_id = int(pad_id)
        self.images = images

    def text_identity(self) -> tuple:
        """What a text prompt's token count depends on: equal identities count equal lengths."""
        tok = self.tokenizer
        return (getattr(tok, "name_or_path", None), len(tok), getattr(tok, "chat_template", None),
                self.apply_chat_template, repr(sorted(self.chat_template_kwargs.items())))

    def render(self, prompt: Any, describe: Describe, position: int) -> str:
        """The text fed to the tokenizer for the prompt at ``position`` of the current list."""
        if isinstance(prompt, str):
            if not self.apply_chat_template:
                return prompt
            messages = [{"role": "user", "content": prompt}]
        elif isinstance(prompt, list) and all(isinstance(m, dict) and isinstance(m.get("content"), str) for m in prompt):
            if not self.apply_chat_template:
                raise DataError(f"{describe(position)}: chat messages need data.apply_chat_template=true")
            messages = prompt
        else:
            raise DataError(
                f"{describe(position)}: prompt must be a string or a list of {{role, content}} messages whose "
                "content is text"
            )
        return self.tokenizer.apply_chat_template(
            messages, add_generation_prompt=True, tokenize=False, **self.chat_template_kwargs
        )

    def token_ids(
        self, prompts: Sequence[Any], describe: Describe, image_sizes: ImageSizes | None = None
    ) -> list[list[int]]:
        """Token ids per prompt; ``describe(i)`` names the i-th prompt's row for error messages."""
        texts = [self.render(p, describe, i) for i, p in enumerate(prompts)]
        if not texts:
            return []
        if image_sizes is not None:
            if self.images is None:
                raise DataError("rows with images need a policy model with a vision tower and image processor")
            texts = [self.images.expand(t, s, describe(i)) for i, (t, s) in enumerate(zip(texts, image_sizes))]
        return [list(ids) for ids in self.tokenizer(texts, add_special_tokens=False)["input_ids"]]

    def lengths(
        self, prompts: Sequence[Any], describe: Describe, image_sizes: ImageSizes | None = None
    ) -> np.ndarray:
        return np.array([len(ids) for ids in self.token_ids(prompts, describe, image_sizes)], dtype=np.int64)

    def too_long_error(self, where: str, length: int) -> PromptTooLongError:
        return PromptTooLongError(
            f"{where}: prompt has {length} tokens > data.max_prompt_length={self.max_prompt_length}; "
            "set data.filter_overlong_prompts=true or data.truncation=left|right"
        )

    def encode(
        self, prompts: Sequence[Any], describe: Describe, image_sizes: ImageSizes | None = None
    ) -> dict[str, torch.Tensor]:
        """``input_ids``, ``attention_mask`` and ``position_ids`` of shape [batch, max_prompt_length]."""
        all_ids = self.token_ids(prompts, describe, image_sizes)
        max_len = self.max_prompt_length
        input_ids = torch.full((len(all_ids), max_len), self.pad_id, dtype=torch.long)
        attention_mask = torch.zeros((len(all_ids), max_len), dtype=torch.long)
        for row, ids in enumerate(all_ids):
            if len(ids) > max_len:
                if self.truncation == "error":
                    raise self.too_long_error(describe(row), len(ids))
                if image_sizes is not None and image_sizes[row]:
                    raise DataError(
                        f"{describe(row)}: a prompt with images cannot be truncated ({len(ids)} tokens > "
                        f"data.max_prompt_length={max_len}) without cutting its image; "
                        "set data.filter_overlong_prompts=true"
                    )
                ids = TRUNCATIONS.get(self.truncation)(ids, max_len)
            if ids:
                input_ids[row, max_len - len(ids) :] = torch.tensor(ids, dtype=torch.long)
                attention_mask[row, max_len - len(ids) :] = 1
        position_ids = (attention_mask.cumsum(dim=-1) - 1).clamp(min=0)
        return {"input_ids": input_ids, "attention_mask": attention_mask, "position_ids": position_ids}
