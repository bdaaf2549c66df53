"""The default job with TRL's ``GRPOTrainer``: the mainstream-library baseline that ``bench_e2e.py`` runs.

Everything that decides what is learned comes from siiRL's own config and code, so only the trainer differs:
the embedded model and tokenizer (fp32, CPU), the prompts in the exact batches siiRL's train loader yields
(its filtered, seeded order; TRL's own shuffling is off), the prompt tokens (TRL renders the same chat
template; ``tests/benchmarks/test_trl_grpo.py`` checks the tokens), the reward (siiRL's reward manager
scores TRL's completion ids), and validation (siiRL's greedy pass over the whole validation set at
``trainer.test_freq``). One siiRL step (``train_batch_size`` prompts x ``rollout.n``) is one TRL generation
batch, updated in ``train_batch_size / ppo_mini_batch_size`` optimizer steps (see ``trl_arguments``).

Writes ``metrics.jsonl`` (``reward/mean``, ``val/score``, ``timing_s/step``) like a siiRL run.
Needs the ``bench`` extra (trl). To leave siiRL's own environment untouched, install it into a venv of its
own and pass that interpreter to ``bench_e2e.py --trl-python``:

    python3 -m venv VENV && VENV/bin/pip install -c ci/constraints-cpu.txt -e ".[bench]"
    VENV/bin/python benchmarks/trl_grpo.py --out DIR [--threads N] [overrides ...]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time
from operator import attrgetter
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # everything is local; never reach for the hub
os.environ.setdefault("WANDB_DISABLED", "true")

import torch
from datasets import Dataset
from transformers import TrainerCallback
from trl import GRPOConfig, GRPOTrainer

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from siirl.algorithms.policy_loss import first_set
from siirl.config_checks import load_config
from siirl.dag_worker.reward_setup import make_reward_manager_from_config
from siirl.data_coordinator import build_train_dataloader, build_val_dataloader
from siirl.data_coordinator.parquet_source import ParquetRows
from siirl.device import get_backend
from siirl.engine.reward.base import RewardInputs
from siirl.engine.rollout import make_rollout_engine
from siirl.engine.workers.model_loading import load_causal_lm, load_tokenizer
from siirl.errors import ConfigError

#: siiRL's policy-loss aggregation -> TRL's loss_type with the same normaliser when one optimizer step is one
#: micro-batch (gradient_accumulation_steps=1): "bnpo" divides by the valid tokens of that batch.
LOSS_TYPES = {"token-mean": "bnpo", "seq-mean-token-mean": "grpo"}
#: Settings TRL's GRPOTrainer reproduces at one value only: config key -> that value.
FIXED_SETTINGS = {
    "algorithm.adv_estimator": "grpo",
    "algorithm.use_kl_in_reward": False,
    "actor_rollout_ref.actor.policy_loss.loss_mode": "vanilla",
    "actor_rollout_ref.actor.entropy_coeff": 0.0,
    "actor_rollout_ref.actor.optim.lr_warmup_steps_ratio": 0.0,
}
#: siiRL's lr schedule -> transformers' scheduler of the same shape (both decay over the whole run; TRL steps
#: it per optimizer step, siiRL per training step, which differ by the mini-batches of one step only).
LR_SCHEDULES = {"constant": "constant", "cosine": "cosine_with_min_lr"}


class SiirlReward:
    """TRL reward function that scores with siiRL's reward manager, so a completion scores the same in both.

    Decodes TRL's completion ids (cut after the first EOS, as siiRL's response mask) the way the manager
    decodes responses, and keeps the mean score of each training batch for the metrics row.
    """

    __name__ = "siirl_reward"  # TRL names its per-function metrics after this

    def __init__(self, manager, tokenizer, data_source_key: str) -> None:
        self.manager, self.tokenizer, self.data_source_key = manager, tokenizer, data_source_key
        self.last_mean = math.nan

    def __call__(self, prompts, completions, completion_ids, **columns) -> list[float]:
        inputs = RewardInputs(
            data_sources=list(columns[self.data_source_key]),
            solutions=[self.tokenizer.decode(ids, skip_special_tokens=True) for ids in completion_ids],
            ground_truths=[str(record["ground_truth"]) for record in columns["reward_model"]],
            extra_infos=list(columns.get("extra_info") or [None] * len(completion_ids)),
            response_lengths=[len(ids) for ids in completion_ids],
        )
        scores, _ = self.manager.score_batch(inputs)
        self.last_mean = statistics.fmean(scores)
        return scores


def train_dataset(cfg, tokenizer, steps: int) -> Dataset:
    """The training rows in the order siiRL's loader reads them, for as many epochs as ``steps`` needs."""
    loader = build_train_dataloader(cfg.data, tokenizer, 0, 1)
    order = [loader.row_ids(epoch) for epoch in range(math.ceil(steps / len(loader)))]
    row_ids = [int(i) for ids in order for i in ids][: steps * cfg.data.train_batch_size]
    columns = [cfg.data.prompt_key, cfg.data.reward_fn_key, "reward_model", "extra_info"]
    rows = ParquetRows(list(cfg.data.train_files), [cfg.data.prompt_key]).read(row_ids, columns)
    prompt_key = cfg.data.prompt_key
    return Dataset.from_list([{"prompt": row.pop(prompt_key), **row} for row in rows])


def trl_arguments(cfg, steps: int, out: Path) -> GRPOConfig:
    """GRPOConfig equal to siiRL's settings (each line names the siiRL setting it mirrors)."""
    arr, algo = cfg.actor_rollout_ref, cfg.algorithm
    actor, rollout, optim = arr.actor, arr.rollout, arr.actor.optim
    n = int(rollout.n)
    mini_batch = int(actor.ppo_mini_batch_size) * n  # samples per optimizer step
    generation_batch = int(cfg.data.train_batch_size) * n  # samples per siiRL step
    if generation_batch % mini_batch:
        raise ConfigError(
            "data.train_batch_size must be a multiple of actor.ppo_mini_batch_size for the TRL run"
        )
    if actor.loss_agg_mode not in LOSS_TYPES:
        raise ConfigError(
            f"actor.loss_agg_mode={actor.loss_agg_mode} has no TRL loss_type; one of {sorted(LOSS_TYPES)}"
        )
    for key, value in FIXED_SETTINGS.items():
        if attrgetter(key)(cfg) != value:
            raise ConfigError(f"the TRL run needs {key}={value}, got {attrgetter(key)(cfg)}")
    if optim.lr_warmup_steps > 0 or optim.lr_scheduler_type not in LR_SCHEDULES:
        raise ConfigError(f"the TRL run mirrors a learning rate {' or '.join(LR_SCHEDULES)} without warm-up only")
    schedule = LR_SCHEDULES[optim.lr_scheduler_type]
    return GRPOConfig(
        output_dir=str(out / "trl"),
        max_steps=steps * (generation_batch // mini_batch),  # TRL counts optimizer steps
        per_device_train_batch_size=mini_batch,  # actor.ppo_mini_batch_size x rollout.n
        gradient_accumulation_steps=1,  # the whole mini-batch in one forward (dynamic bsz fits it in one)
        steps_per_generation=generation_batch // mini_batch,  # data.train_batch_size / ppo_mini_batch_size
        num_generations=n,  # rollout.n
        num_iterations=int(actor.ppo_epochs),
        max_completion_length=int(cfg.data.max_response_length),
        temperature=float(rollout.temperature),
        top_p=float(rollout.top_p),
        top_k=max(int(rollout.top_k), 0),  # siiRL -1 / TRL 0: no top-k
        learning_rate=float(optim.lr),
        lr_scheduler_type=schedule,  # optim.lr_scheduler_type
        lr_scheduler_kwargs={"min_lr_rate": float(optim.min_lr_ratio)} if schedule != "constant" else None,
        warmup_steps=0,
        optim="adamw_torch",
        adam_beta1=float(optim.betas[0]),
        adam_beta2=float(optim.betas[1]),
        adam_epsilon=float(optim.eps),
        weight_decay=float(optim.weight_decay),
        max_grad_norm=float(actor.grad_clip),
        beta=float(actor.kl_loss_coef) if actor.use_kl_loss else 0.0,
        # unset clip_ratio_low / clip_ratio_high: clip_ratio, as siiRL's vanilla loss reads them
        epsilon=float(first_set(actor.clip_ratio_low, actor.clip_ratio)),
        epsilon_high=float(first_set(actor.clip_ratio_high, actor.clip_ratio)),
        loss_type=LOSS_TYPES[actor.loss_agg_mode],
        scale_rewards="group" if algo.norm_adv_by_std_in_grpo else "none",
        shuffle_dataset=False,  # rows already come in siiRL's order
        seed=int(cfg.trainer.seed),
        use_vllm=False,
        use_cpu=True,
        bf16=False,
        fp16=False,
        activation_checkpointing=bool(arr.model.enable_gradient_checkpointing),
        report_to="none",
        logging_strategy="no",
        save_strategy="no",
        disable_tqdm=True,
    )


class GreedyValidation:
    """siiRL's validation pass (HF rollout engine, greedy, the whole validation set, the same reward manager),
    so the TRL run's ``val/score`` is computed exactly as the other runs' are."""

    def __init__(self, cfg, tokenizer, reward_manager) -> None:
        self.tokenizer, self.reward = tokenizer, reward_manager
        self.engine = make_rollout_engine(
            "hf",
            model_cfg=cfg.actor_rollout_ref.model,
            rollout_cfg=cfg.actor_rollout_ref.rollout,
            backend=get_backend("cpu"),
            max_response_length=cfg.data.max_response_length,
            tokenizer=tokenizer,
        )
        self.loader = build_val_dataloader(cfg.data, tokenizer, 0, 1)

    def __call__(self, model) -> float:
        self.engine.sync_weights(model.named_parameters())
        total, count = 0.0, 0
        for prompts in self.loader:
            scores, _ = self.reward(self.engine.generate(prompts, validate=True), self.tokenizer)
            total, count = total + float(scores.sum()), count + scores.shape[0]
        return total / max(count, 1)


class SiirlMetrics(TrainerCallback):
    """One ``metrics.jsonl`` row per siiRL step (``updates_per_step`` TRL optimizer steps): the mean training
    reward, the time from the step's first optimizer step to its last (generation, scoring, old log-probs
    and the updates), and at siiRL's schedule a greedy validation score, timed outside the step."""

    def __init__(
        self, sink, updates_per_step: int, reward: SiirlReward, validate: GreedyValidation, cfg
    ) -> None:
        self.sink, self.updates_per_step, self.reward, self.validate = (
            sink,
            updates_per_step,
            reward,
            validate,
        )
        self.total_steps = 0
        self.test_freq, self.val_before_train = int(cfg.trainer.test_freq), bool(cfg.trainer.val_before_train)
        self.clock = 0.0

    def write(self, row: dict) -> None:
        self.sink.write(json.dumps(row) + "\n")
        self.sink.flush()

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        self.total_steps = state.max_steps // self.updates_per_step
        if self.val_before_train:
            self.write({"step": 0, "val/score": self.validate(model)})

    def on_step_begin(self, args, state, control, **kwargs):
        if state.global_step % self.updates_per_step == 0:
            self.clock = time.perf_counter()

    def on_step_end(self, args, state, control, model=None, **kwargs):
        if state.global_step % self.updates_per_step:
            return
        step = state.global_step // self.updates_per_step
        row = {
            "step": step,
            "reward/mean": self.reward.last_mean,
            "timing_s/step": time.perf_counter() - self.clock,
        }
        if (self.test_freq > 0 and step % self.test_freq == 0) or step == self.total_steps:
            row["val/score"] = self.validate(model)
        self.write(row)


def build_trainer(cfg, steps: int, out: Path, sink) -> GRPOTrainer:
    arr = cfg.actor_rollout_ref
    tokenizer = load_tokenizer(arr.model)
    torch.manual_seed(cfg.trainer.seed)
    model = load_causal_lm(arr.model, get_backend("cpu"), torch.float32)
    manager = make_reward_manager_from_config(cfg, tokenizer)
    reward = SiirlReward(manager, tokenizer, cfg.data.reward_fn_key)
    args = trl_arguments(cfg, steps, out)
    metrics = SiirlMetrics(
        sink, args.steps_per_generation, reward, GreedyValidation(cfg, tokenizer, manager), cfg
    )
    return GRPOTrainer(
        model=model,
        reward_funcs=reward,
        args=args,
        train_dataset=train_dataset(cfg, tokenizer, steps),
        processing_class=tokenizer,
        callbacks=[metrics],
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument(
        "--threads", type=int, default=0, help="intra-op threads (0: torch's default, all cores)"
    )
    args, overrides = parser.parse_known_args(argv)
    began = time.perf_counter()
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    cfg = load_config(["device=cpu", *overrides])
    steps = cfg.trainer.total_training_steps
    if steps <= 0:
        steps = len(build_train_dataloader(cfg.data, load_tokenizer(cfg.actor_rollout_ref.model), 0, 1))
        steps *= cfg.trainer.total_epochs
    args.out.mkdir(parents=True, exist_ok=True)
    with open(args.out / "metrics.jsonl", "w", encoding="utf-8") as sink:
        build_trainer(cfg, steps, args.out, sink).train()
    print(
        json.dumps(
            {
                "baseline": "trl_grpo",
                "threads": torch.get_num_threads(),
                "steps": steps,
                "seconds": time.perf_counter() - began,
            }
        )
    )


if __name__ == "__main__":
    main()
