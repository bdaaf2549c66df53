"""One worker's training loop: feed data shards through the task graph, validate, checkpoint, log.

Every worker runs this same loop on its own shard; they meet only in collectives (gradient and metric
all-reduces, checkpoint barriers), so there is no controller to wait on. When the plan splits the graph
into placement groups (e.g. one per agent), a worker whose node is fed by another group takes that batch
from the data coordinator and hands its own outputs to the groups that read them (``handoff``); only the
workers running the graph's first node read training data. Single-group plans hand nothing over.

Each step is timed stage by stage (``timing_s/data``, ``timing_s/node/<node id>``,
``timing_s/redistribute``, ``timing_s/handoff``), so the parts add up to ``timing_s/step``; the update's
inner phases come from the engine workers. Rank 0 posts the headline numbers to the driver's progress bar.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING

import torch
import torch.distributed as dist

from siirl import startup_timing, user_code
from siirl.dag_worker import builtin_nodes, val_generations
from siirl.dag_worker.agent_nodes import validate_team
from siirl.dag_worker.batch_source import choose_batch_source
from siirl.dag_worker.checkpoint import CheckpointManager, checkpoint_root, rng_state, set_rng_state
from siirl.dag_worker.layouts import node_layout_key, role_layouts
from siirl.dag_worker.metrics import MetricsLogger, RunInfo, reduce_metrics
from siirl.dag_worker.plot import plot_run
from siirl.dag_worker.progress import ProgressReporter
from siirl.dag_worker.rollout_dump import RolloutDump
from siirl.dag_worker.step_profiler import profiled_step
from siirl.dag_worker.val_reward_extra import add_reward_extra, val_reward_extra
from siirl.data_coordinator import needs_redistribution
from siirl.execution.dag import NEED_MORE_DATA, NodeOutput, TaskGraph
from siirl.execution.dag.contract_check import check_declared_writes
from siirl.execution.dag.node_types import NodeRole, NodeType

if TYPE_CHECKING:
    from siirl.dag_worker.context import WorkerContext

logger = logging.getLogger(__name__)


class TrainingLoop:
    def __init__(self, ctx: WorkerContext, graph: TaskGraph) -> None:
        self.ctx, self.cfg, self.rank = ctx, ctx.cfg, ctx.rank
        self.nodes = graph.get_nodes()
        self.node_configs = {node.node_id: node.node_config() for node in self.nodes}
        self.contracts = {node.node_id: node.effective_contract(self.cfg) for node in self.nodes}
        self.layouts = role_layouts(ctx.plan)
        self.data_layout = self.layouts.get("rollout")
        self.step = 0
        self.run_dir = Path(self.cfg.trainer.output_dir)
        self.ckpt = CheckpointManager(checkpoint_root(self.cfg.trainer), self.rank, self.cfg.trainer.max_ckpt_to_keep)
        self.progress = ProgressReporter(self.rank)
        self.samples_per_step = int(self.cfg.data.train_batch_size) * int(self.cfg.actor_rollout_ref.rollout.n)
        self._trained_ahead: list[list[int]] = []  # a resumed asynchronous run: prompts drawn ahead, trained
        self.handoffs = ctx.handoffs
        skip = self.cfg.actor_rollout_ref.rollout.skip
        first_rolls_out = self.nodes[0].node_role is NodeRole.ROLLOUT and self.nodes[0].node_type is NodeType.MODEL_INFERENCE
        self.dump = RolloutDump(skip, self.rank) if skip.enable and first_rolls_out else None
        #: Workers whose first node is fed by another placement group read no training data.
        self.loads_data = not (self.handoffs and self.handoffs.receives(self.nodes[0].node_id))

    # ----- one step -----

    def run_graph(self) -> dict[str, float]:
        metrics: dict[str, float] = {"timing_s/redistribute": 0.0}
        if self.loads_data:
            metrics.update({"data/gen_batches": 0.0, "timing_s/data": 0.0})
        if self.handoffs:
            metrics["timing_s/handoff"] = 0.0
        metrics.update({f"timing_s/node/{node.node_id}": 0.0 for node in self.nodes})
        index, batch, layout = 0, None, self.data_layout
        while index < len(self.nodes):
            clock = time.perf_counter()
            if index == 0 and self.loads_data:  # the source's draw (none when a producer samples ahead)
                (batch, drawn), layout = self.ctx.batch_source.draw(), self.data_layout
                metrics["data/gen_batches"] += drawn
                metrics["timing_s/data"] += time.perf_counter() - clock
            node = self.nodes[index]
            self.progress.beat(self.step, f"node {node.node_id}")
            if self.handoffs and self.handoffs.receives(node.node_id):
                batch, layout = self.handoffs.fetch(self.step, node.node_id), None
                metrics["timing_s/handoff"] += time.perf_counter() - clock
            wanted = self.layouts.get(node_layout_key(node, self.layouts) or "", layout)
            if layout is not None and wanted is not None and needs_redistribution(layout, wanted):
                clock = time.perf_counter()
                batch = self.ctx.coordinator.redistribute(
                    self.step, node.node_id, batch, worker_rank=self.rank,
                    producer_layout=layout, consumer_layout=wanted,
                )
                layout = wanted
                metrics["timing_s/redistribute"] += time.perf_counter() - clock
            clock = time.perf_counter()
            out = self._run_node(index, node, batch)
            metrics[f"timing_s/node/{node.node_id}"] += time.perf_counter() - clock
            metrics.update(out.metrics)
            if out.info.get(NEED_MORE_DATA):
                index = 0
                continue
            check_declared_writes(node.node_id, self.contracts[node.node_id], out.batch)
            if self.handoffs:
                clock = time.perf_counter()
                self.handoffs.send(self.step, node.node_id, out.batch)
                metrics["timing_s/handoff"] += time.perf_counter() - clock
            batch, index = out.batch, index + 1
        sampler = getattr(self.ctx.train_loader, "user_sampler", None)
        if self.loads_data and sampler is not None:
            sampler.update(batch)  # verl's curriculum hook, with this worker's batch after the step
        return metrics

    def _run_node(self, index: int, node, batch):
        """Run ``node``; the rollout node of a run with ``rollout.skip`` replays its dump when it has one."""
        replay = self.dump.load(self.step) if index == 0 and self.dump is not None else None
        if replay is not None:
            return NodeOutput(replay[0], metrics={**replay[1], "rollout/replayed": 1.0})
        out = node.executable(batch, config=self.cfg, node_config=self.node_configs[node.node_id], ctx=self.ctx)
        if index == 0 and self.dump is not None:
            self.dump.save(self.step, out.batch, out.metrics)
            out.metrics["rollout/replayed"] = 0.0
        return out

    def validate(self) -> dict[str, float]:
        """Greedy generation on this worker's validation shard; the score is averaged over all samples.
        An asynchronous run's producer waits meanwhile (the engine then holds the trained weights)."""
        if self.ctx.val_loader is None:
            return {}
        with self.ctx.batch_source.engine_held(self.step):
            return self._validate()

    def _validate(self) -> dict[str, float]:
        if self.ctx.agents():  # multi-agent graphs: greedy team episodes
            return validate_team(self.ctx, self.step)
        # The weight sync is collective; do it here so it never waits on a rank with an empty val shard.
        samples = self.ctx.policy().rollout is not None  # trainers placed apart from the rollout add nothing
        if samples:
            self.ctx.policy().refresh()
        self.ctx.validating = True
        total, count, solved, episodes = 0.0, 0, 0.0, 0
        extra: dict[str, list[float]] = {}  # the score function's extra keys: [sum, count] of their numbers
        shown = int(self.cfg.trainer.log_val_generations) if self.rank == 0 else 0
        try:
            for batch in self.ctx.val_loader if samples else ():
                self.progress.beat(self.step, "validation")
                generated = builtin_nodes.generate(batch, ctx=self.ctx)
                if "env/success_rate" in generated.metrics:  # environment rollouts: episodes solved
                    solved += generated.metrics["env/success_rate"] * batch.batch_size[0]
                    episodes += batch.batch_size[0]
                rewarded = builtin_nodes.compute_reward(generated.batch, ctx=self.ctx)
                out = rewarded.batch
                add_reward_extra(extra, rewarded.metrics, out)
                scores = out["token_level_scores"].sum(-1)
                total, count = total + scores.sum().item(), count + scores.numel()
                if shown > 0:
                    rows = val_generations.sample_rows(out, scores, self.ctx.tokenizer, shown)
                    val_generations.write_rows(self.run_dir, self.step, rows)
                    shown -= len(rows)
        finally:
            self.ctx.validating = False
        sums = torch.tensor([total, float(count), solved, float(episodes)], dtype=torch.float64)
        if dist.is_initialized():
            dist.all_reduce(sums)
        # how many prompts the score averages: a reader can tell a 1024-image validation from a 64-row one
        result = {"val/score": (sums[0] / sums[1].clamp(min=1)).item(), "val/prompts": int(sums[1].item())}
        if sums[3] > 0:
            result["val/success_rate"] = (sums[2] / sums[3]).item()
        result.update(val_reward_extra(extra))
        return result

    # ----- checkpoints -----

    def _worker_state(self, step: int) -> dict:
        loader, trained_ahead = self.ctx.batch_source.resume_point()
        return {"step": step, "dataloader": loader, "trained_ahead": trained_ahead, "rng": rng_state(),
                "kl_ctrl": self.ctx.kl_ctrl_state()}

    def _resume(self) -> int:
        mode = str(self.cfg.trainer.resume_mode)
        # The launcher pins a fully verified folder; each file is checked again as it is read.
        path = self.ckpt.resolve(mode, verify="all" if mode == "auto" else "manifest")
        if path is None:
            return 0
        state = self.ckpt.load(path, self.ctx.checkpoint_components())
        self.ctx.train_loader.load_state_dict(state["dataloader"])
        self._trained_ahead = state.get("trained_ahead", [])
        set_rng_state(state["rng"])
        self.ctx.load_kl_ctrl_state(state.get("kl_ctrl"))
        self.ctx.mark_policies_stale()
        logger.info("resumed from %s at step %d", path, state["step"])
        return int(state["step"])

    # ----- the whole run -----

    def total_steps(self) -> int:
        if self.cfg.trainer.total_training_steps > 0:
            return int(self.cfg.trainer.total_training_steps)
        return len(self.ctx.train_loader) * int(self.cfg.trainer.total_epochs)

    def fit(self) -> dict[str, float]:
        trainer = self.cfg.trainer
        total = self.total_steps()
        start = self._resume()
        self.ctx.batch_source = choose_batch_source(self.ctx, start, self._trained_ahead)
        run = RunInfo(trainer.project_name, trainer.experiment_name, dataclasses.asdict(self.cfg), resumed_at=start)
        self.metrics_logger = MetricsLogger(self.run_dir, list(trainer.logger), enabled=self.rank == 0, run=run)
        startup_timing.mark("loggers", self.ctx.startup_marks)
        summary: dict[str, float] = {}
        self.progress.report(start, total, {})
        if trainer.val_before_train and start == 0:
            before = self.validate()
            if before:
                summary["val/score_before"] = before["val/score"]
                self.metrics_logger.log(0, before)
                self.progress.report(start, total, before)
        try:
            self.ctx.batch_source.start(start)
            self._train(start, total, summary)
        finally:
            self.ctx.batch_source.close()
        self.metrics_logger.close()
        if self.rank == 0:
            plot = plot_run(self.run_dir)
            if plot is not None:
                logger.info("reward plot: %s", plot)
        return summary

    def _train(self, start: int, total: int, summary: dict[str, float]) -> None:
        trainer, marks = self.cfg.trainer, self.ctx.startup_marks
        for step in range(start + 1, total + 1):
            self.step = self.ctx.step = step
            user_code.set_step(step)
            if step == start + 1:
                startup_timing.mark("validation", marks)
            began = time.perf_counter()
            with profiled_step(self.cfg, step, self.rank):
                metrics = self.run_graph()
                self.ctx.batch_source.after_update(step)  # asynchronous runs: weights move on sync steps
            metrics["timing_s/step"] = time.perf_counter() - began
            self.ctx.step_finished(metrics)
            began = time.perf_counter()
            metrics = reduce_metrics(metrics, same_keys=not self.handoffs)
            metrics["timing_s/reduce_metrics"] = time.perf_counter() - began
            metrics["perf/samples_per_s"] = self.samples_per_step / max(metrics["timing_s/step"], 1e-9)
            if step == start + 1:  # where this rank's start-up went (rank 0's is logged)
                metrics.update(startup_timing.phase_seconds(marks))
            if (trainer.test_freq > 0 and step % trainer.test_freq == 0) or step == total:
                began = time.perf_counter()
                metrics.update(self.validate())
                metrics["timing_s/validate"] = time.perf_counter() - began
            self.metrics_logger.log(step, metrics)  # before the save: a failed save loses no metrics
            self.progress.report(step, total, metrics)
            if trainer.save_freq > 0 and step % trainer.save_freq == 0:
                self.ckpt.save(step, self.ctx.checkpoint_components(), self._worker_state(step))
            summary.update({k: metrics[k] for k in ("reward/mean", "val/score", startup_timing.TOTAL) if k in metrics})
