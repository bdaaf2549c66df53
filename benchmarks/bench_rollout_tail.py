"""What a long tail costs the hf engine on this host, and what partial rollouts' streaming recovers of it.

Partial rollouts pay off where a step's tail leaves the device idle: decoding a few long responses costs
about as much per token as decoding a full batch (memory-bound decode on a GPU), so the finished rows' share
of the device is wasted until the step ends. This script measures whether that holds here, with the
embedded long-tail model (``tiny_qwen2_running_sums``), one thread, as one DAG worker samples:

1. Cost of one sampled token for every row (decode step) by rows in the batch, and of reading 30-token
   prompts (prefill): flat in rows means a tail to recover, linear means none.
2. Sampling a step's prompt groups on the long-tail task: whole batches (``generate``, the synchronous
   path) against a stream (``RolloutPool``, the partial-rollout path) holding 2 or 3 steps' prompts in
   flight, pieces ending as soon as a step's groups have finished (``chunk_tokens=null``) or after 8 tokens.
   One weight version throughout, so the stream restarts nothing: this is the engine-side best case.

    python benchmarks/bench_rollout_tail.py [--prompts 16] [--batches 16]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import torch
from tensordict import TensorDict
from transformers import AutoModelForCausalLM, AutoTokenizer

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from siirl.embedded_assets import asset_path
from siirl.engine.rollout import make_rollout_engine
from siirl.engine.rollout.rollout_pool import RolloutPool
from siirl.params.model import ModelConfig, RolloutConfig

MODEL = "tiny_qwen2_running_sums"
SAMPLES, RESPONSE = 8, 32
ROWS = (8, 32, 128, 256)
STREAMS = ((2, None), (3, None), (2, 8), (3, 8))


def decode_and_prefill_ms(model, rows: int, prompt: int = 30, tokens: int = 20) -> tuple[float, float]:
    """(ms per decode step, ms to read the prompts) for ``rows`` rows, by the difference of two lengths."""
    ids = torch.randint(3, 20, (rows, prompt), generator=torch.Generator().manual_seed(0))

    def timed(new: int) -> float:
        began = time.perf_counter()
        with torch.no_grad():
            model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=new,
                           min_new_tokens=new, do_sample=True, pad_token_id=0)
        return time.perf_counter() - began

    timed(1)
    one, many = min(timed(1) for _ in range(3)), min(timed(tokens + 1) for _ in range(3))
    return (many - one) / tokens * 1e3, one * 1e3


class Prompts:
    """The task's training prompts, left-padded, in file order."""

    def __init__(self) -> None:
        tokenizer = AutoTokenizer.from_pretrained(asset_path(MODEL))
        rows = pq.read_table(asset_path("data/running_sums/train.parquet")).to_pylist()
        texts = [tokenizer.apply_chat_template(r["prompt"], add_generation_prompt=True, tokenize=False) for r in rows]
        self.encoded = [tokenizer(text, add_special_tokens=False)["input_ids"] for text in texts]
        self.width, self.pad, self.next = max(map(len, self.encoded)), tokenizer.pad_token_id, 0

    def take(self, count: int) -> TensorDict:
        ids = torch.full((count, self.width), self.pad)
        mask = torch.zeros(count, self.width, dtype=torch.long)
        for row, tokens in enumerate(self.encoded[self.next : self.next + count]):
            ids[row, self.width - len(tokens) :], mask[row, self.width - len(tokens) :] = torch.tensor(tokens), 1
        self.next += count
        return TensorDict({"input_ids": ids, "attention_mask": mask}, batch_size=[count])


def sampling_s(prompts: int, batches: int) -> dict:
    """Seconds per step's ``prompts`` groups: whole batches, then each stream; response lengths of the batches."""
    engine = make_rollout_engine("hf", model_cfg=ModelConfig(path=asset_path(MODEL)),
                                 rollout_cfg=RolloutConfig(n=SAMPLES), backend="cpu", max_response_length=RESPONSE)
    source = Prompts()
    engine.generate(source.take(prompts))  # warm-up
    lengths, began = [], time.perf_counter()
    for _ in range(batches):
        lengths.append(engine.generate(source.take(prompts))["response_mask"].sum(-1).float())
    result = {"sync_s": (time.perf_counter() - began) / batches}
    lengths = torch.cat(lengths)
    result |= {"length_mean": lengths.mean().item(), "length_max": lengths.max().item()}
    for in_flight, chunk in STREAMS:
        pool = RolloutPool(engine)
        pool.add(source.take(prompts * in_flight))
        taken, began = 0, time.perf_counter()
        while taken < batches:
            pool.advance(0, max_tokens=chunk, want_groups=prompts)
            if pool.finished_groups >= prompts:
                pool.take(prompts)
                pool.add(source.take(prompts))
                taken += 1
        result[f"stream_{in_flight}_{chunk}_s"] = (time.perf_counter() - began) / batches
    return result


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, default=16, help="prompt groups per step and worker")
    parser.add_argument("--batches", type=int, default=16)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    torch.manual_seed(0)
    result: dict = {"benchmark": "rollout_tail", "prompts": args.prompts, "samples": SAMPLES,
                    "load_average_1m_before": os.getloadavg()[0]}
    result["decode_ms"], result["prefill_ms"] = {}, {}
    model = AutoModelForCausalLM.from_pretrained(asset_path(MODEL), dtype=torch.float32).eval()
    for rows in ROWS:
        result["decode_ms"][rows], result["prefill_ms"][rows] = decode_and_prefill_ms(model, rows)
    result |= sampling_s(args.prompts, args.batches)
    print(f"hf engine, one thread, {MODEL}; load {result['load_average_1m_before']:.1f} before the run")
    print(f"{'rows':>6}{'ms per decode step':>20}{'ms to read 30-token prompts':>30}")
    for rows in ROWS:
        print(f"{rows:>6}{result['decode_ms'][rows]:>20.2f}{result['prefill_ms'][rows]:>30.1f}")
    print(f"\nsampling {args.prompts} prompts x {SAMPLES} (lengths mean {result['length_mean']:.1f}, "
          f"max {result['length_max']:.0f} of {RESPONSE})")
    print(f"{'path':<52}{'s per step':>12}{'vs sync':>10}")
    print(f"{'whole batches (generate)':<52}{result['sync_s']:>12.3f}{1.0:>9.2f}x")
    for in_flight, chunk in STREAMS:
        seconds = result[f"stream_{in_flight}_{chunk}_s"]
        label = f"stream, {in_flight} steps in flight, pieces of {chunk or 'any'} tokens"
        print(f"{label:<52}{seconds:>12.3f}{result['sync_s'] / seconds:>9.2f}x")
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    main()
