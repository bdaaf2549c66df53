"""A copy of the embedded model that calls the gsm8k tool: its chat template gains a ``tool`` role and
the tools' names, and a short SFT teaches it to answer every prompt with the same hermes tool call
(submitting 42). The embedded model never saw a tool call; this is the smallest setting in which its
sampled output reliably holds one."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from siirl.embedded_assets import default_model_path
from tests.fakes_loader import fake_module

TOOL_CHAT_TEMPLATE = fake_module("faulty_tools").TOOL_CHAT_TEMPLATE

TOOL_SCHEMA = {"type": "function", "function": {"name": "calc_gsm8k_reward"}}


def tool_call_text(answer: int) -> str:
    arguments = {"answer": str(answer)}
    return f"<tool_call>{json.dumps({'name': 'calc_gsm8k_reward', 'arguments': arguments})}</tool_call>"


def build_tool_model(out: Path, steps: int = 120, seed: int = 0) -> tuple[Path, float]:
    """Write the model to ``out``; returns it and the final SFT loss (mean over target tokens)."""
    shutil.copytree(default_model_path(), out)
    (out / "chat_template.jinja").write_text(TOOL_CHAT_TEMPLATE)
    tokenizer = AutoTokenizer.from_pretrained(out)
    model = AutoModelForCausalLM.from_pretrained(out, dtype=torch.float32)
    generator = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    loss = torch.tensor(0.0)
    for _ in range(steps):
        pairs = torch.randint(0, 50, (16, 2), generator=generator).tolist()
        rows, masks = [], []
        for a, b in pairs:
            chat = [{"role": "user", "content": f"{a}+{b}="}]
            prompt = tokenizer.apply_chat_template(chat, tools=[TOOL_SCHEMA], add_generation_prompt=True, tokenize=False)
            head = tokenizer(prompt, add_special_tokens=False)["input_ids"]
            tail = tokenizer(tool_call_text(42), add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
            rows.append(head + tail)
            masks.append([0] * len(head) + [1] * len(tail))
        width = max(map(len, rows))
        ids = torch.tensor([r + [tokenizer.pad_token_id] * (width - len(r)) for r in rows])
        target = torch.tensor([m + [0] * (width - len(m)) for m in masks])
        attention = torch.tensor([[1] * len(r) + [0] * (width - len(r)) for r in rows])
        logits = model(input_ids=ids, attention_mask=attention).logits[:, :-1]
        token_loss = torch.nn.functional.cross_entropy(logits.transpose(1, 2), ids[:, 1:], reduction="none")
        loss = (token_loss * target[:, 1:]).sum() / target[:, 1:].sum()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    model.save_pretrained(out)
    return out, loss.item()
