"""Why the default job and TRL's GRPOTrainer learn differently: one setting changed at a time, two seeds each.

Every row is the default command (``python -m siirl.main_dag device=cpu``) with the row's overrides, run once
per seed (``trainer.seed=S data.seed=S``); the ``trl`` row is ``benchmarks/trl_grpo.py`` on the same job (its
GRPOConfig mirrors siiRL's config, see that script), run by ``--trl-python``. Each row changes one thing in
which the two trainers differ on this job:

- loss aggregation: siiRL's ``token-mean`` (TRL's ``bnpo``) vs ``seq-mean-token-mean`` (TRL's ``grpo``);
- advantage normalisation: the group standard deviation on or off;
- the ratio's source: the rollout's recorded log-probs vs a recomputed actor forward;
- how the generation batch splits into optimizer steps: two contiguous mini-batches (siiRL), two shuffled
  mini-batches (TRL shuffles the generation batch before it splits it), one optimizer step per generation;
- data parallelism: the update's gradient averaged over two DAG workers vs one worker with every row;
- sampling: the sampling temperature;
- the learning-rate schedule, which both trainers share (``trl_grpo.py`` mirrors it): constant, or a lower
  peak rate.

Reports per row and seed: the greedy validation score at every ``trainer.test_freq`` steps and at the end,
and per row the mean final score over seeds with its standard error (binomial on the validation set's
prompts, combined over seeds), then one JSON line.

    python benchmarks/bench_learning_ablation.py [--seeds 1 2] [--steps N] [--rows default shuffled ...]
        [--trl-python VENV/bin/python] [overrides ...]
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_e2e import run_command, summarize, trl_interpreter

#: Row name -> the overrides it adds to the default command (the ``trl`` row runs TRL instead).
ROWS: dict[str, list[str]] = {
    "default": [],
    "seq-mean-token-mean": ["actor_rollout_ref.actor.loss_agg_mode=seq-mean-token-mean"],
    "no std normalisation": ["algorithm.norm_adv_by_std_in_grpo=false"],
    "ratio from recomputed forward": ["actor_rollout_ref.actor.old_log_prob_source=recompute"],
    "shuffled mini-batches": ["actor_rollout_ref.actor.shuffle=true"],
    "one optimizer step per generation": ["actor_rollout_ref.actor.ppo_mini_batch_size=32"],
    "one DAG worker": ["trainer.n_devices_per_node=1"],
    "temperature 0.8": ["actor_rollout_ref.rollout.temperature=0.8"],
    # The schedule (the default: lr 2e-4 decayed by cosine, configs/task/arith.yaml), one half at a time.
    "constant lr": ["actor_rollout_ref.actor.optim.lr_scheduler_type=constant"],
    "lr 1e-4": ["actor_rollout_ref.actor.optim.lr=1e-4"],
    "trl": [],
}


def final_score_error(score: float, prompts: int) -> float:
    """Binomial standard error of one validation score over ``prompts`` prompts."""
    return math.sqrt(max(score * (1 - score), 0.0) / max(prompts, 1))


def row_command(
    name: str, seed: int, steps: int, extra: list[str], trl_python: str | None, trl_threads: int, out: Path
) -> list[str]:
    """The command line of one row and seed, writing its ``metrics.jsonl`` under ``out``."""
    common = [*ROWS[name], f"trainer.seed={seed}", f"data.seed={seed}", *extra]
    common += [f"trainer.total_training_steps={steps}"] if steps > 0 else []
    if name == "trl":
        script = str(ROOT / "benchmarks" / "trl_grpo.py")
        return [trl_python, script, "--out", str(out), "--threads", str(trl_threads), *common]
    return [
        sys.executable,
        "-m",
        "siirl.main_dag",
        "device=cpu",
        f"trainer.output_dir={out}",
        "trainer.logger=[jsonl]",
        *common,
    ]


def run_row(
    name: str, seed: int, steps: int, extra: list[str], trl_python: str | None, trl_threads: int, work: Path
) -> dict:
    out = work / f"{name.replace(' ', '_')}_seed{seed}"
    return run_command(name, row_command(name, seed, steps, extra, trl_python, trl_threads, out), out, work)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2])
    parser.add_argument(
        "--steps", type=int, default=-1, help="training steps (-1: the default command's own)"
    )
    parser.add_argument("--rows", nargs="+", default=list(ROWS), choices=list(ROWS))
    parser.add_argument(
        "--trl-python", help="interpreter with trl installed (default: this one if it has trl)"
    )
    parser.add_argument(
        "--trl-threads",
        type=int,
        default=1,
        help="TRL's intra-op threads (1: a busy host stalls torch's default OpenMP team; the math is the same)",
    )
    args, extra = parser.parse_known_args(argv)
    trl_python = trl_interpreter(args.trl_python) if "trl" in args.rows else None
    rows = [r for r in args.rows if r != "trl" or trl_python]
    sys.path.insert(0, str(ROOT))
    import pyarrow.parquet as pq

    from siirl.config_checks import load_config

    cfg = load_config(["device=cpu", *extra])
    samples = cfg.data.train_batch_size * cfg.actor_rollout_ref.rollout.n
    prompts = sum(pq.ParquetFile(path).metadata.num_rows for path in cfg.data.val_files)
    results: dict[str, dict] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in rows:
            per_seed = {}
            for seed in args.seeds:
                summary = summarize(
                    run_row(name, seed, args.steps, extra, trl_python, args.trl_threads, Path(tmp)), samples
                )
                per_seed[seed] = summary
                print(
                    f"{name:<36} seed {seed}: samples/s {summary['samples_per_s']:.0f}, validation "
                    + " ".join(f"{v:.3f}" for v in summary["val_curve"]),
                    flush=True,
                )
            finals = [s["val_final"] for s in per_seed.values()]
            error = math.sqrt(sum(final_score_error(f, prompts) ** 2 for f in finals)) / len(finals)
            results[name] = {
                "final_mean": statistics.fmean(finals),
                "final_se": error,
                "peak_minus_final": statistics.fmean(
                    max(s["val_curve"]) - s["val_final"] for s in per_seed.values()
                ),
                "seeds": {
                    seed: {"val_curve": s["val_curve"], "samples_per_s": s["samples_per_s"]}
                    for seed, s in per_seed.items()
                },
            }
    print_table(results, args.seeds)
    print(
        json.dumps(
            {
                "benchmark": "learning_ablation",
                "samples_per_step": samples,
                "val_prompts": prompts,
                "steps": args.steps,
                "overrides": extra,
                "rows": results,
            }
        )
    )


def print_table(results: dict[str, dict], seeds: list[int]) -> None:
    print(
        f"\n{'row':<36}"
        + "".join(f"{'seed ' + str(s) + ' final':>15}" for s in seeds)
        + f"{'mean':>8}{'+-se':>7}{'peak-final':>12}"
    )
    for name, row in results.items():
        finals = "".join(f"{row['seeds'][s]['val_curve'][-1]:>15.3f}" for s in seeds)
        print(
            f"{name:<36}{finals}{row['final_mean']:>8.3f}{row['final_se']:>7.3f}{row['peak_minus_final']:>12.3f}"
        )
    print("\nvalidation curves (every trainer.test_freq steps)")
    for name, row in results.items():
        for seed in seeds:
            print(f"{name:<36}seed {seed}: " + " ".join(f"{v:.3f}" for v in row["seeds"][seed]["val_curve"]))


if __name__ == "__main__":
    main()
