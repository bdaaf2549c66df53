"""The embedded VLM's GRPO step, stage by stage, and what the ``shared`` layout saves over ``packed``.

Two measurements in one run:

- **stage breakdown**: a short ``python -m siirl.main_dag`` run on the embedded tiny Qwen2-VL and the digit
  images (2 DAG workers, Ray, ``n=8`` samples per prompt); each stage's mean seconds per step (the run's
  ``timing_s/*`` metrics, as ``bench_e2e.py`` splits them) and its share of the step;
- **shared vs packed**: one actor update of the same model on the same batch (``--prompts`` digit prompts
  x ``--n`` samples, responses of mixed lengths) in the ``shared`` layout (``remove_padding_layout=auto``
  with sdpa: each distinct prompt, image included, packed once) and ``packed`` (one copy per sample). It
  reports the update's forward and backward seconds (the engine's own phase timer) and the images and
  patches the vision tower encoded, as ratios packed / shared.

Layouts take turns, repeat after repeat. On the CPU the update timings use one torch thread (``--threads``).
Prints a table and one JSON line (also written to ``--json-out`` when given).

    python benchmarks/bench_vlm.py [--steps 6] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from tensordict import TensorDict

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_e2e import breakdown, run_command
from bench_packing import free_port

from siirl.data_coordinator import build_train_dataloader
from siirl.data_coordinator.tensordict_ops import non_tensor_list, set_non_tensor_list
from siirl.device import get_backend
from siirl.embedded_assets import default_vlm_data_files, default_vlm_model_path
from siirl.engine.workers import ActorWorker
from siirl.engine.workers.model_loading import load_tokenizer
from siirl.engine.workers.vision import load_image_processor, vision_tower
from siirl.params.data import DataConfig
from siirl.params.model import ActorConfig, ModelConfig, OptimConfig

#: layout -> the ``model.remove_padding_layout`` that picks it (``auto`` shares prompts with sdpa attention)
LAYOUTS = {"packed": "packed", "shared": "auto"}
#: Per update: forward / backward wall seconds (the engine's phase timer), the whole update's process CPU
#: seconds (robust on a shared host with one thread), and the vision tower's encoded images and patches.
MEASURES = ("forward", "backward", "update_cpu", "images", "patches")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--steps", type=int, default=6, help="GRPO steps of the stage-breakdown run (0: skip it)"
    )
    parser.add_argument("--prompts", type=int, default=16, help="distinct prompts of the layout batch")
    parser.add_argument("--n", type=int, default=8, help="samples per prompt")
    parser.add_argument("--max-response", type=int, default=8, help="longest response of the layout batch")
    parser.add_argument("--micro", type=int, default=32, help="rows per micro-batch (sets the token budget)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads of the layout updates")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json-out", type=Path, default=None)
    return parser.parse_args(argv)


def stage_shares(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    """Mean seconds per step of each stage of a short VLM GRPO run, and each stage's share of the step."""
    train, val = default_vlm_data_files()
    out_dir = work / "vlm_run"
    argv = [
        sys.executable,
        "-m",
        "siirl.main_dag",
        "device=cpu",
        f"trainer.output_dir={out_dir}",
        f"actor_rollout_ref.model.path={default_vlm_model_path()}",
        f"data.train_files={train}",
        f"data.val_files={val}",
        f"actor_rollout_ref.rollout.n={args.n}",
        f"trainer.total_training_steps={args.steps}",
        "trainer.val_before_train=false",
        "trainer.test_freq=-1",
    ]
    run = run_command("vlm", argv, out_dir, work)
    stages = breakdown(run["rows"], run["wall_s"])
    step = dict(stages)["= step"]
    return {
        "steps": args.steps,
        # the whole command's rows (start-up, validation, wall) are seconds of the run, not shares of a step
        "stages": [
            {
                "stage": name,
                "s": seconds,
                "of_step": None if name.startswith(("whole", "= whole")) else seconds / step,
            }
            for name, seconds in stages
        ],
    }


def layout_batch(args: argparse.Namespace, model_cfg: ModelConfig) -> TensorDict:
    """``--prompts`` digit prompts from the loader, each repeated ``--n`` times, with responses of 1 to
    ``--max-response`` tokens appended (right-padded), as a rollout hands them to the update."""
    tokenizer = load_tokenizer(model_cfg)
    data = DataConfig(
        train_files=[default_vlm_data_files()[0]], train_batch_size=args.prompts, seed=args.seed
    )
    prompts = next(
        iter(build_train_dataloader(data, tokenizer, 0, 1, image_processor=load_image_processor(model_cfg)))
    )
    rows, width = args.prompts * args.n, args.max_response
    gen = torch.Generator().manual_seed(args.seed)
    lengths = torch.randint(1, width + 1, (rows,), generator=gen)
    response_mask = (torch.arange(width).unsqueeze(0) < lengths.unsqueeze(1)).long()
    digits = tokenizer.convert_tokens_to_ids(list("0123456789"))
    responses = torch.tensor(digits)[torch.randint(0, 10, (rows, width), generator=gen)] * response_mask
    prompt_mask = prompts["attention_mask"].repeat_interleave(args.n, 0)
    mask = torch.cat([prompt_mask, response_mask], dim=1)
    batch = TensorDict(
        {
            "input_ids": torch.cat([prompts["input_ids"].repeat_interleave(args.n, 0), responses], dim=1),
            "attention_mask": mask,
            "position_ids": (mask.cumsum(-1) - 1).clamp(min=0),
            "responses": responses,
            "response_mask": response_mask,
            "old_log_probs": torch.full((rows, width), -2.3),
            "advantages": torch.randn(rows, width, generator=gen) * response_mask,
        },
        batch_size=[rows],
    )
    inputs = non_tensor_list(prompts, "multi_modal_inputs")
    set_non_tensor_list(batch, "multi_modal_inputs", [inputs[i // args.n] for i in range(rows)])
    return batch


class TowerCounter:
    """Images and patches the vision tower encodes (a forward pre-hook reads each call's ``grid_thw``)."""

    def __init__(self, tower: torch.nn.Module) -> None:
        self.images = self.patches = 0
        tower.register_forward_pre_hook(self._count, with_kwargs=True)

    def _count(self, _module, args, kwargs) -> None:
        grid = kwargs.get("grid_thw", args[1] if len(args) > 1 else None)
        self.images += int(grid.shape[0])
        self.patches += int(grid.prod(-1).sum())

    def take(self) -> tuple[int, int]:
        counts, self.images, self.patches = (self.images, self.patches), 0, 0
        return counts


def layout_comparison(args: argparse.Namespace, device: str) -> list[dict[str, Any]]:
    """One update per layout per repeat, on the same batch and token budget; medians of the repeats."""
    model_cfg = ModelConfig(path=default_vlm_model_path(), use_remove_padding=True)
    batch = layout_batch(args, model_cfg)
    actor_cfg = ActorConfig(
        ppo_mini_batch_size=batch.batch_size[0],
        use_dynamic_bsz=True,
        ppo_max_token_len_per_gpu=args.micro * batch["input_ids"].shape[1],
        optim=OptimConfig(lr=1e-5),
    )
    actors, counters, samples = {}, {}, {layout: [] for layout in LAYOUTS}
    for layout, requested in LAYOUTS.items():
        cfg = ModelConfig(path=model_cfg.path, use_remove_padding=True, remove_padding_layout=requested)
        actors[layout] = ActorWorker(cfg, actor_cfg, device)
        assert actors[layout].layout == layout, f"{requested} picked {actors[layout].layout}"
        counters[layout] = TowerCounter(vision_tower(actors[layout].model))
        actors[layout].update_policy(batch[: args.n])  # warm-up
        counters[layout].take()
    for _ in range(args.repeats):
        for layout, actor in actors.items():
            cpu = time.process_time()
            metrics = actor.update_policy(batch)
            cpu = time.process_time() - cpu
            images, patches = counters[layout].take()
            phases = {phase: metrics[f"timing_s/update_actor/{phase}"] for phase in ("forward", "backward")}
            samples[layout].append({**phases, "update_cpu": cpu, "images": images, "patches": patches})
    return [
        {
            "layout": layout,
            "remove_padding_layout": LAYOUTS[layout],
            **{key: statistics.median(s[key] for s in runs) for key in MEASURES},
        }
        for layout, runs in samples.items()
    ]


def report(args: argparse.Namespace, device: str, stages: dict | None, layouts: list[dict]) -> dict:
    if stages:
        print(f"VLM GRPO step, mean of {stages['steps']} steps (2 DAG workers, n={args.n}):")
        print(f"{'stage':<46} {'s/step':>8} {'of step':>8}")
        for row in stages["stages"]:
            share = "" if row["of_step"] is None else f"{row['of_step']:.1%}"
            print(f"{row['stage']:<46} {row['s']:>8.3f} {share:>8}")
    packed, shared = (next(r for r in layouts if r["layout"] == name) for name in LAYOUTS)
    ratios = {
        "fwd_bwd": (packed["forward"] + packed["backward"]) / (shared["forward"] + shared["backward"]),
        "forward": packed["forward"] / shared["forward"],
        "update_cpu": packed["update_cpu"] / shared["update_cpu"],
        "tower_images": packed["images"] / shared["images"],
        "tower_patches": packed["patches"] / shared["patches"],
    }
    rows = args.prompts * args.n
    print(
        f"\nactor update, {rows} rows ({args.prompts} prompts x {args.n}), device={device} threads={args.threads}:"
    )
    print(
        f"{'layout':<8} {'forward s':>10} {'backward s':>11} {'update cpu s':>13} {'tower images':>13} {'tower patches':>14}"
    )
    for row in layouts:
        print(
            f"{row['layout']:<8} {row['forward']:>10.3f} {row['backward']:>11.3f} {row['update_cpu']:>13.3f} "
            f"{row['images']:>13} {row['patches']:>14}"
        )
    print("packed / shared: " + ", ".join(f"{name} {value:.2f}x" for name, value in ratios.items()))
    record = {
        "benchmark": "vlm",
        "device": device,
        "stage_breakdown": stages,
        "layouts": layouts,
        "packed_over_shared": ratios,
    }
    line = json.dumps(record)
    print(line)
    if args.json_out is not None:
        args.json_out.write_text(line + "\n", encoding="utf-8")
    return record


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        stages = stage_shares(args, Path(tmp)) if args.steps > 0 else None
    torch.set_num_threads(args.threads)
    backend = get_backend("cpu")
    if not dist.is_initialized():
        dist.init_process_group(
            backend.distributed_backend(), init_method=f"tcp://127.0.0.1:{free_port()}", rank=0, world_size=1
        )
    layouts = layout_comparison(args, backend.name)
    return report(args, backend.name, stages, layouts)


if __name__ == "__main__":
    main()
