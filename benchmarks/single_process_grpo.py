"""A plain single-process GRPO loop: the same-machine baseline that ``bench_e2e.py`` measures siiRL against.

Same model (the embedded tiny Qwen2 unless overridden), same parquet data, batch (``data.train_batch_size``
prompts x ``rollout.n`` samples), HF sampling, rule reward, GRPO advantages, vanilla clipped policy loss
(token-mean), AdamW with the same learning rate and gradient clipping, ``ppo_mini_batch_size`` prompts per
optimizer step, the same validation schedule (greedy, the whole validation set). What a mainstream
single-process trainer does: one Python process, no Ray, no torch.distributed, torch's default intra-op
threads (all cores), padded forwards (``--layout packed`` uses siiRL's padding-free forward instead).

Writes ``metrics.jsonl`` (``reward/mean``, ``val/score``, ``timing_s/step``) like a siiRL run.

    python benchmarks/single_process_grpo.py --out DIR [--layout padded|packed] [overrides ...]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from siirl.algorithms import compute_advantage, compute_policy_loss
from siirl.config_checks import load_config
from siirl.dag_worker.reward_setup import make_reward_manager_from_config
from siirl.data_coordinator import build_train_dataloader, build_val_dataloader, non_tensor_list
from siirl.device import get_backend
from siirl.engine.rollout import make_rollout_engine
from siirl.engine.workers.actor import log_prob_reduce
from siirl.engine.workers.model_loading import load_causal_lm, load_tokenizer
from siirl.engine.workers.padding_free import choose_layout, response_outputs


class SingleProcessGRPO:
    def __init__(self, cfg, layout: str) -> None:
        self.cfg, arr = cfg, cfg.actor_rollout_ref
        backend = get_backend("cpu")
        self.tokenizer = load_tokenizer(arr.model)
        torch.manual_seed(cfg.trainer.seed)
        self.model = load_causal_lm(arr.model, backend, torch.float32)
        self.layout, attn = choose_layout(layout != "padded", "packed", self.model.config._attn_implementation)
        self.model.set_attn_implementation(attn)
        self.engine = make_rollout_engine(
            "hf", model_cfg=arr.model, rollout_cfg=arr.rollout, backend=backend,
            max_response_length=cfg.data.max_response_length, tokenizer=self.tokenizer,
        )
        self.reward = make_reward_manager_from_config(cfg, self.tokenizer)
        self.train = build_train_dataloader(cfg.data, self.tokenizer, 0, 1)
        self.val = build_val_dataloader(cfg.data, self.tokenizer, 0, 1)
        optim = arr.actor.optim
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=optim.lr, betas=tuple(optim.betas),
                                           eps=optim.eps, weight_decay=optim.weight_decay)
        self.reduce = log_prob_reduce(float(arr.rollout.temperature), with_entropy=False)

    def log_probs(self, batch) -> torch.Tensor:
        return response_outputs(self.model, batch["input_ids"], batch["attention_mask"], batch["position_ids"],
                                batch["responses"].shape[1], self.layout, self.reduce, logits_to_keep=True)

    def scores(self, batch) -> torch.Tensor:
        scores, _ = self.reward(batch, self.tokenizer)
        return scores.to(torch.float32)

    def step(self, prompts) -> float:
        self.engine.sync_weights(self.model.named_parameters())
        batch = self.engine.generate(prompts)
        batch["token_level_rewards"] = self.scores(batch)
        mask = batch["response_mask"]
        advantages, _ = compute_advantage("grpo", token_level_rewards=batch["token_level_rewards"],
                                          response_mask=mask, index=non_tensor_list(batch, "uid"), values=None,
                                          config=self.cfg.algorithm)
        self.model.eval()
        with torch.no_grad():
            old = self.log_probs(batch)
        self.model.train()
        actor = self.cfg.actor_rollout_ref.actor
        mini = int(actor.ppo_mini_batch_size) * int(self.cfg.actor_rollout_ref.rollout.n)
        for start in range(0, batch.batch_size[0], mini):
            part = slice(start, start + mini)
            loss, _ = compute_policy_loss(
                "vanilla", old_log_prob=old[part], log_prob=self.log_probs(batch[part]),
                advantages=advantages[part], response_mask=mask[part], loss_agg_mode="token-mean", config=actor,
            )
            loss.backward()
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), float(actor.grad_clip))
            self.optimizer.step()
            self.optimizer.zero_grad(set_to_none=True)
        return float(batch["token_level_rewards"].sum(-1).mean())

    def validate(self) -> float:
        self.engine.sync_weights(self.model.named_parameters())
        total, count = 0.0, 0
        for prompts in self.val:
            scores = self.scores(self.engine.generate(prompts, validate=True)).sum(-1)
            total, count = total + float(scores.sum()), count + scores.numel()
        return total / max(count, 1)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--layout", choices=("padded", "packed"), default="padded")
    parser.add_argument("--threads", type=int, default=0, help="intra-op threads (0: torch's default, all cores)")
    args, overrides = parser.parse_known_args(argv)
    began = time.perf_counter()
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    cfg = load_config(["device=cpu", *overrides])
    trainer = SingleProcessGRPO(cfg, args.layout)
    total = cfg.trainer.total_training_steps
    total = total if total > 0 else len(trainer.train) * cfg.trainer.total_epochs
    args.out.mkdir(parents=True, exist_ok=True)
    with open(args.out / "metrics.jsonl", "w", encoding="utf-8") as sink:
        if cfg.trainer.val_before_train:
            sink.write(json.dumps({"step": 0, "val/score": trainer.validate()}) + "\n")
        batches = iter(trainer.train)
        for step in range(1, total + 1):
            prompts = next(batches, None)
            if prompts is None:
                batches = iter(trainer.train)
                prompts = next(batches)
            clock = time.perf_counter()
            row = {"step": step, "reward/mean": trainer.step(prompts)}
            row["timing_s/step"] = time.perf_counter() - clock
            if (cfg.trainer.test_freq > 0 and step % cfg.trainer.test_freq == 0) or step == total:
                row["val/score"] = trainer.validate()
            sink.write(json.dumps(row) + "\n")
            sink.flush()
    print(json.dumps({"baseline": "single_process_grpo", "layout": args.layout, "threads": torch.get_num_threads(),
                      "steps": total, "seconds": time.perf_counter() - began}))


if __name__ == "__main__":
    main()
