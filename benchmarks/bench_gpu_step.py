"""One GPU, one GRPO step: siiRL's stages against plain PyTorch/transformers doing the same work.

Builds a Qwen2.5-0.5B-shaped Qwen2 (hidden 896, 24 layers, 14 heads / 2 KV heads, intermediate 4864,
tied embeddings, random init: 358M parameters with the embedded byte tokenizer), runs GRPO steps through
the real launcher (``device=cuda``, 1 GPU, HF rollout, 16 prompts x 8 samples, up to 256 new tokens, KL
reference on) and reads the per-stage times from ``metrics.jsonl``. Then, in the same run and on the same
GPU, the baselines: ``model.generate`` of the same batch, a no-grad forward and a fwd+bwd+AdamW step over
the same tokens. Prints a table and one JSON line with the ratios and their targets.

    python benchmarks/bench_gpu_step.py [--steps 6] [--keep DIR] [extra launcher overrides ...]
    python benchmarks/bench_gpu_step.py --smoke     # CPU: builds a shrunken model only (checks the script)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch
from transformers import GenerationConfig, Qwen2Config, Qwen2ForCausalLM

from siirl.device import DeviceBackend, get_backend
from siirl.errors import DeviceUnavailableError
from siirl.tasks.tiny_tokenizer import build_tokenizer

REPO = Path(__file__).resolve().parents[1]
PROMPTS, SAMPLES, NEW_TOKENS = 16, 8, 256
#: The launcher override choosing the device; the baselines ask the device layer for the same family.
DEVICE_OVERRIDE = "device=cuda"
#: Stage -> (baseline it is compared with, target ratio).
TARGETS = {"gen": ("generate", 1.25), "old_log_prob": ("forward", 1.5), "ref": ("forward", 1.5),
           "update_actor": ("train_step", 1.5)}
SHAPE = {"hidden_size": 896, "num_hidden_layers": 24, "num_attention_heads": 14, "num_key_value_heads": 2,
         "intermediate_size": 4864}
SMOKE_SHAPE = {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
               "intermediate_size": 128}


def model_config(smoke: bool = False) -> Qwen2Config:
    tokenizer = build_tokenizer()
    return Qwen2Config(
        vocab_size=len(tokenizer), max_position_embeddings=tokenizer.model_max_length, tie_word_embeddings=True,
        bos_token_id=tokenizer.eos_token_id, eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id, **(SMOKE_SHAPE if smoke else SHAPE),
    )


def parameter_count(config: Qwen2Config) -> int:
    """Parameters of a model of this config, counted on the meta device (nothing allocated)."""
    with torch.device("meta"):
        return sum(p.numel() for p in Qwen2ForCausalLM(config).parameters())


def build_and_save(out_dir: Path, smoke: bool = False, seed: int = 0) -> Path:
    """Random-init model + the embedded tokenizer, saved as a Hugging Face dir the launcher can load."""
    tokenizer = build_tokenizer()
    config = model_config(smoke)
    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(config)
    model.generation_config = GenerationConfig(bos_token_id=config.eos_token_id, eos_token_id=config.eos_token_id,
                                               pad_token_id=config.pad_token_id)
    model.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
    return out_dir


def launcher_overrides(model_dir: Path, run_dir: Path, steps: int) -> list[str]:
    return [
        DEVICE_OVERRIDE, "trainer.nnodes=1", "trainer.n_devices_per_node=1", f"actor_rollout_ref.model.path={model_dir}",
        "actor_rollout_ref.rollout.name=hf", f"data.train_batch_size={PROMPTS}", f"actor_rollout_ref.rollout.n={SAMPLES}",
        f"data.max_response_length={NEW_TOKENS}", f"actor_rollout_ref.actor.ppo_mini_batch_size={PROMPTS}",
        "actor_rollout_ref.actor.use_kl_loss=true", f"trainer.total_training_steps={steps}",
        "trainer.val_before_train=false", "trainer.test_freq=-1", "trainer.save_freq=-1",
        "trainer.logger=[console,jsonl]", f"trainer.output_dir={run_dir}", "trainer.ray_address=local",
    ]


def run_launcher(overrides: list[str]) -> list[dict]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-m", "siirl.main_dag", *overrides], cwd=REPO, env=env, check=False)
    if done.returncode != 0:
        sys.exit(f"bench_gpu_step: the launcher failed with exit code {done.returncode}")
    run_dir = Path(next(o.split("=", 1)[1] for o in overrides if o.startswith("trainer.output_dir=")))
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line.strip()]


def stage_seconds(rows: list[dict]) -> dict[str, float]:
    """Median per-stage seconds over the training steps after the first (which includes warm-up)."""
    steps = [r for r in rows if "timing_s/step" in r and "actor/pg_loss" in r]
    steps = steps[1:] or steps
    keys = sorted({k for r in steps for k in r if k.startswith("timing_s/")})
    out = {k.removeprefix("timing_s/"): statistics.median(r[k] for r in steps if k in r) for k in keys}
    out["response_tokens"] = statistics.median(r["response_length/mean"] for r in steps) * PROMPTS * SAMPLES
    return out


def prompt_batch(tokenizer, device: torch.device) -> dict[str, torch.Tensor]:
    """The first training prompts, rendered with the chat template, each repeated ``SAMPLES`` times."""
    import pyarrow.parquet as pq

    rows = pq.read_table(REPO / "siirl/assets/data/arith/train.parquet").to_pylist()[:PROMPTS]
    texts = [tokenizer.apply_chat_template(r["prompt"], add_generation_prompt=True, tokenize=False) for r in rows]
    enc = tokenizer([t for t in texts for _ in range(SAMPLES)], return_tensors="pt", padding=True,
                    padding_side="left", add_special_tokens=False)
    return {k: v.to(device) for k, v in enc.items() if k in ("input_ids", "attention_mask")}


def timed(backend: DeviceBackend, fn, repeats: int = 3) -> float:
    fn()  # warm-up
    backend.synchronize()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        backend.synchronize()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def inference_baselines(
    backend: DeviceBackend, model_dir: Path
) -> tuple[dict[str, float], torch.Tensor, torch.Tensor]:
    """Plain ``model.generate`` of the batch and a no-grad forward over what it generated (bf16)."""
    tokenizer = build_tokenizer()
    device = backend.device(0)
    model = Qwen2ForCausalLM.from_pretrained(model_dir, dtype=torch.bfloat16, attn_implementation="sdpa").to(device)
    batch = prompt_batch(tokenizer, device)
    config = GenerationConfig(do_sample=True, temperature=1.0, top_p=1.0, top_k=0, max_new_tokens=NEW_TOKENS,
                              eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id)
    with torch.no_grad():
        sequences = model.generate(**batch, generation_config=config)
        generated = sequences[:, batch["input_ids"].shape[1]:]
        mask = torch.cat([batch["attention_mask"], (generated != tokenizer.pad_token_id).long()], dim=1)
        result = {"generate": timed(backend, lambda: model.generate(**batch, generation_config=config), repeats=2),
                  "generated_tokens": float((generated != tokenizer.pad_token_id).sum()),
                  "forward": timed(backend, lambda: model(input_ids=sequences, attention_mask=mask).logits)}
    return result, sequences, mask


def train_step_baseline(backend: DeviceBackend, model_dir: Path, sequences: torch.Tensor, mask: torch.Tensor) -> float:
    """fp32 master weights, bf16 autocast, token-mean log-likelihood loss, fused AdamW: one step."""
    device = backend.device(0)
    model = Qwen2ForCausalLM.from_pretrained(model_dir, dtype=torch.float32, attn_implementation="sdpa").to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-6, fused=True)

    def train_step() -> None:
        with torch.autocast(device.type, dtype=torch.bfloat16):
            logits = model(input_ids=sequences, attention_mask=mask).logits
        logp = torch.log_softmax(logits[:, :-1].float(), -1).gather(-1, sequences[:, 1:, None]).squeeze(-1)
        (-(logp * mask[:, 1:]).sum() / mask[:, 1:].sum()).backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    return timed(backend, train_step)


def baselines(backend: DeviceBackend, model_dir: Path) -> dict[str, float]:
    result, sequences, mask = inference_baselines(backend, model_dir)
    backend.empty_cache()
    result["train_step"] = train_step_baseline(backend, model_dir, sequences, mask)
    return result


def report(stages: dict[str, float], base: dict[str, float], params: int) -> dict:
    rows, ratios = [], {}
    for stage, (baseline, target) in TARGETS.items():
        if stage not in stages:
            continue
        ratio = stages[stage] / base[baseline]
        ratios[stage] = {"seconds": stages[stage], "baseline": baseline, "baseline_s": base[baseline],
                         "ratio": ratio, "target": target, "met": ratio <= target}
        rows.append((stage, stages[stage], baseline, base[baseline], ratio, target))
    print(f"model: Qwen2 {params / 1e6:.0f}M params, {PROMPTS} prompts x {SAMPLES} samples, <= {NEW_TOKENS} new tokens")
    print(f"{'stage':<14}{'siiRL s':>9}  {'baseline':<11}{'base s':>8}{'ratio':>8}{'target':>8}")
    for stage, ours, name, theirs, ratio, target in rows:
        print(f"{stage:<14}{ours:>9.2f}  {name:<11}{theirs:>8.2f}{ratio:>8.2f}{target:>8.2f}")
    step = stages.get("step", float("nan"))
    print(f"step {step:.2f}s; rollout {stages['response_tokens'] / stages['gen']:.0f} tok/s "
          f"(plain generate {base['generated_tokens'] / base['generate']:.0f} tok/s)")
    return {"params": params, "step_s": step, "stages": ratios, "response_tokens": stages["response_tokens"],
            "rollout_tok_s": stages["response_tokens"] / stages["gen"],
            "generate_tok_s": base["generated_tokens"] / base["generate"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--keep", type=Path, default=None, help="keep the model and run dirs here")
    parser.add_argument("--smoke", action="store_true", help="CPU: build and save a shrunken model, then stop")
    args, extra = parser.parse_known_args()
    work = args.keep or Path(tempfile.mkdtemp(prefix="siirl_gpu_bench_"))
    if args.smoke:
        path = build_and_save(work / "model", smoke=True)
        params = parameter_count(model_config(smoke=True))
        print(json.dumps({"smoke": True, "model_dir": str(path), "params": params,
                          "full_size_params": parameter_count(model_config())}))
        return
    try:
        backend = get_backend(DEVICE_OVERRIDE.removeprefix("device="))
    except DeviceUnavailableError as exc:
        sys.exit(f"bench_gpu_step: needs a CUDA GPU: {exc} (--smoke checks the script on a CPU)")
    model_dir = build_and_save(work / "model")
    rows = run_launcher([*launcher_overrides(model_dir, work / "run", args.steps), *extra])
    stages = stage_seconds(rows)
    base = baselines(backend, model_dir)
    print(json.dumps(report(stages, base, parameter_count(model_config()))))


if __name__ == "__main__":
    main()
