"""Prompts of tool-calling rollouts: the row's raw chat rendered with the tools' schemas.

The dataloader renders prompts without tools; a chat template announces tools only when it is given
their schemas (Qwen's puts them in the system turn), so tool runs re-render each row from its
``raw_prompt`` (``data.return_raw_chat=true``), as verl's agent loop does. A row with images keeps them: its
``<image>`` placeholders are expanded to the vision blocks the dataloader gave the row (same image-pad counts,
read from its prompt ids), so the row's ``multi_modal_inputs`` still match its prompt.
"""

from __future__ import annotations

from typing import Any

import torch
from tensordict import TensorDict

from siirl.data_coordinator.images import IMAGE_PAD, expand_placeholders
from siirl.data_coordinator.tensordict_ops import non_tensor_list
from siirl.engine.rollout.batch_ops import prompt_position_ids
from siirl.engine.workers.model_loading import load_tokenizer
from siirl.environment.outputs import env_mode
from siirl.environment.tools import load_tool_config
from siirl.errors import ConfigError
from siirl.params.data import data_tokenizer_model
from siirl.params.root import SiirlConfig


def render_tool_prompts(
    rows: TensorDict,
    tokenizer: Any,
    schemas: list[dict[str, Any]],
    pad_id: int,
    chat_template_kwargs: dict[str, Any] | None = None,
) -> None:
    """Replace ``input_ids`` / ``attention_mask`` / ``position_ids`` of ``rows`` (left-padded, same width);
    ``chat_template_kwargs`` are ``data.apply_chat_template_kwargs``, as the dataset rendered them."""
    if "raw_prompt" not in set(rows.keys()):
        raise RuntimeError("tool-calling rollouts render the chat with the tools: set data.return_raw_chat=true")
    width = rows["input_ids"].shape[1]
    image_pad = tokenizer.get_vocab().get(IMAGE_PAD, -1)
    ids = torch.full((rows.batch_size[0], width), pad_id, dtype=torch.long)
    mask = torch.zeros_like(ids)
    for row, messages in enumerate(non_tensor_list(rows, "raw_prompt")):
        if isinstance(messages, str):
            messages = [{"role": "user", "content": messages}]
        text = tokenizer.apply_chat_template(
            list(messages), tools=schemas, add_generation_prompt=True, tokenize=False, **(chat_template_kwargs or {})
        )
        runs = image_pad_runs(rows["input_ids"][row][rows["attention_mask"][row].bool()].tolist(), image_pad)
        if runs:
            text = expand_placeholders(text, runs, f"row {row}'s raw_prompt")
        tokens = tokenizer(text, add_special_tokens=False)["input_ids"]
        if len(tokens) > width:
            raise RuntimeError(
                f"a prompt rendered with the tool schemas takes {len(tokens)} tokens > data.max_prompt_length={width}; "
                "raise data.max_prompt_length"
            )
        ids[row, width - len(tokens) :] = torch.tensor(tokens, dtype=torch.long)
        mask[row, width - len(tokens) :] = 1
    rows["input_ids"], rows["attention_mask"] = ids, mask
    rows["position_ids"] = prompt_position_ids(mask)


def image_pad_runs(ids: list[int], image_pad: int) -> list[int]:
    """Lengths of the runs of ``image_pad`` in ``ids``: one per image, in order."""
    runs: list[int] = []
    for i, token in enumerate(ids):
        if token == image_pad:
            if i and ids[i - 1] == image_pad:
                runs[-1] += 1
            else:
                runs.append(1)
    return runs


def check_tool_template(cfg: SiirlConfig) -> None:
    """Tool-calling runs render tool responses with the chat template's ``tool`` role (the tokenizer is read
    only for such a run)."""
    if env_mode(cfg) != "tools" or not cfg.actor_rollout_ref.rollout.multi_turn.tool_config_path:
        return
    tokenizer = load_tokenizer(data_tokenizer_model(cfg))
    chat = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}, {"role": "tool", "content": "r"}]
    try:
        tokenizer.apply_chat_template(chat, tokenize=False, add_generation_prompt=True)
    except Exception as exc:  # noqa: BLE001 - jinja raises whatever the template says
        reason = " ".join(str(exc).split())
        raise ConfigError(
            f"actor_rollout_ref.rollout.multi_turn.tool_config_path: the chat template of "
            f"{cfg.actor_rollout_ref.model.path} cannot render a 'tool' message ({reason}); use a model whose "
            "template has a tool role"
        ) from None


def check_tool_prompt_width(cfg: SiirlConfig, batch: TensorDict, tokenizer: Any) -> None:
    """The first batch re-rendered with the tools' schemas still fits ``data.max_prompt_length``, or every
    worker would fail at step 1."""
    path = cfg.actor_rollout_ref.rollout.multi_turn.tool_config_path
    if env_mode(cfg) != "tools" or not path:
        return
    schemas = [spec.schema for spec in load_tool_config(str(path))]
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    try:
        render_tool_prompts(batch.clone(), tokenizer, schemas, pad, dict(cfg.data.apply_chat_template_kwargs))
    except RuntimeError as exc:
        raise ConfigError(
            f"bad config: actor_rollout_ref.rollout.multi_turn.tool_config_path={path} "
            f"(format {cfg.actor_rollout_ref.rollout.multi_turn.format}): {exc}"
        ) from None
