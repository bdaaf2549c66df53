"""How a DAG worker builds its :class:`WorkerContext`, in start-up order, each phase marked for the start-up
timing: tokenizer, process groups, data shard, reward, hand-offs, then the models its graph needs. Apart from
the context itself so the model builders (siirl.dag_worker.models) can type the context they read."""

from __future__ import annotations

from siirl import startup_timing
from siirl.dag_worker.context import WorkerContext
from siirl.dag_worker.handoff import Handoffs
from siirl.dag_worker.layouts import moves_samples
from siirl.dag_worker.process_groups import build_dp_groups, build_sp_groups
from siirl.dag_worker.reward_setup import make_reward_manager_from_config
from siirl.device import DeviceBackend
from siirl.execution.scheduler.plan import ExecutionPlan
from siirl.params.data import data_tokenizer_model
from siirl.params.root import SiirlConfig


def build_context(
    cfg: SiirlConfig, plan: ExecutionPlan, rank: int, backend: DeviceBackend, local_device: int,
    startup_marks: dict[str, float] | None = None,
) -> WorkerContext:
    from siirl.dag_worker.env_setup import env_reward_manager
    from siirl.dag_worker.models import build_models
    from siirl.data_coordinator import build_train_dataloader, build_val_dataloader
    from siirl.data_coordinator.dataloader import dist_scan_share
    from siirl.engine.workers.model_loading import load_tokenizer
    from siirl.engine.workers.vision import load_image_processor

    marks = {} if startup_marks is None else startup_marks
    me = plan.worker(rank)
    backend.manual_seed(cfg.trainer.seed + rank)
    tokenizer = load_tokenizer(data_tokenizer_model(cfg))
    images = load_image_processor(data_tokenizer_model(cfg))
    startup_timing.mark("tokenizer", marks)
    groups, sp_groups = build_dp_groups(plan, rank), build_sp_groups(plan, rank)
    startup_timing.mark("process_groups", marks)
    data_coord = me.data_coord()
    # Every worker scans a 1/world slice of the rows for over-long prompts; they share the findings.
    # Workers whose first node is fed by another placement group build the loader (same epoch
    # length everywhere) but never iterate it, so they read no rows.
    train_loader = build_train_dataloader(
        cfg.data, tokenizer, data_coord.dp_rank, data_coord.dp_size, scan=dist_scan_share(), image_processor=images,
        prompts_per_draw=plan.resolved.prompts_per_draw,
    )
    val_loader = (
        build_val_dataloader(
            cfg.data, tokenizer, data_coord.dp_rank, data_coord.dp_size, scan=dist_scan_share(),
            image_processor=images,
        )
        if cfg.data.val_files else None
    )
    startup_timing.mark("data", marks)
    reward_manager = env_reward_manager(cfg, tokenizer) or make_reward_manager_from_config(cfg, tokenizer)
    startup_timing.mark("reward", marks)
    ctx = WorkerContext(
        cfg=cfg, plan=plan, rank=rank, backend=backend, tokenizer=tokenizer, graph=me.graph,
        local_device=local_device, groups=groups, sp_groups=sp_groups, train_loader=train_loader,
        val_loader=val_loader, reward_manager=reward_manager, startup_marks=marks,
    )
    if moves_samples(plan):
        from siirl.data_coordinator import DataCoordinator

        ctx.coordinator = DataCoordinator(balance=cfg.trainer.balance_batch)
    ctx.handoffs = Handoffs(plan, rank, ctx.coordinator)
    ctx.models = build_models(ctx, me.graph)
    startup_timing.mark("models", marks)
    return ctx
