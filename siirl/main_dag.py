"""Launcher: Hydra config -> pipeline -> plan -> Ray -> DAG workers.

``python -m siirl.main_dag [--plan] [overrides...]`` (or the ``siirl`` console script; ``siirl plan ...``
equals ``--plan``). Mistakes in what the user gave (config, device, pipeline, paths) end as ONE line on
stderr and exit code 2; a failed job exits 1; Ctrl-C exits 130.
"""

from __future__ import annotations

import argparse
import gc
import logging
import os
import signal
import sys
from pathlib import Path

from omegaconf import OmegaConf

from siirl import startup_gc, startup_timing
from siirl.errors import SiirlUserError
from siirl.finished_run import finished_message, resume_message

logger = logging.getLogger("siirl")

EXIT_USER_ERROR, EXIT_JOB_FAILED, EXIT_INTERRUPTED = 2, 1, 130


def _parse(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    parser = argparse.ArgumentParser(
        prog="siirl",
        description="Train an LLM with RL on a DAG of workers (no single controller).",
        epilog="Overrides are Hydra-style key=value pairs, e.g. device=cpu algorithm.adv_estimator=grpo",
    )
    parser.add_argument("--plan", action="store_true", help="print the execution plan, write DAG pictures, exit")
    parser.add_argument("--print-config", action="store_true", help="print the resolved config and exit")
    parser.add_argument("--config-path", "-cp", help="directory of a YAML config to start from (as in Hydra)")
    parser.add_argument("--config-name", "-cn", help="name of that YAML config (overrides still apply on top)")
    if argv[:1] == ["plan"]:
        argv = ["--plan", *argv[1:]]
    return parser.parse_known_args(argv)


def _setup_logging() -> None:
    logging.basicConfig(
        level=os.environ.get("SIIRL_LOG_LEVEL", "INFO"),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        datefmt="%H:%M:%S",
    )


def prepare(overrides: list[str], config_path: str | None = None, config_name: str | None = None):
    """Everything that can be checked before Ray starts: config, device, engine, pipeline, plan."""
    from siirl.config_checks import load_config
    from siirl.dag_worker.checkpoint import pin_resume_checkpoint
    from siirl.device import get_backend
    from siirl.execution.dag.run_pipeline import select_pipeline
    from siirl.execution.scheduler.planner import plan_from_config
    from siirl.preflight import check_inputs, check_plan

    startup_timing.mark("imports")
    cfg = load_config(overrides, config_path=config_path, config_name=config_name)
    startup_timing.mark("config")
    backend = get_backend(cfg.trainer.device)
    engine = cfg.actor_rollout_ref.rollout.name
    if not backend.supports_rollout(engine):
        raise SiirlUserError(
            f"rollout engine '{engine}' is not supported on device={backend.name}; "
            f"supported: {', '.join(backend.rollout_engines)}"
        )
    check_inputs(cfg)
    graph = select_pipeline(cfg)
    plan = plan_from_config(graph, cfg)
    check_plan(cfg, plan)
    cfg = pin_resume_checkpoint(cfg)
    startup_timing.mark("preflight")
    return cfg, backend, graph, plan


def main(argv: list[str] | None = None) -> int:
    startup_timing.launcher_started()
    _setup_logging()
    args, overrides = _parse(sys.argv[1:] if argv is None else argv)
    unknown_flags = [o for o in overrides if o.startswith("-")]
    if unknown_flags:
        print(f"siirl: error: unknown option {unknown_flags[0]} (see --help)", file=sys.stderr)
        return EXIT_USER_ERROR
    try:
        cfg, backend, graph, plan = prepare(overrides, args.config_path, args.config_name)
        if args.print_config:
            print(OmegaConf.to_yaml(OmegaConf.structured(cfg)))  # the typed tree, dumped as YAML
            return 0
        finished = None if args.plan else finished_message(cfg, plan.resolved.prompts_per_draw)
        if finished:  # resuming would start Ray to train nothing
            print(finished)
            return 0
        from siirl.execution.scheduler.plan_view import render_plan, show_plan

        logger.info("device=%s, pipeline=%s, %d DAG workers", backend.name, graph.graph_id, plan.world_size)
        print(render_plan(plan))
        if args.plan:
            from siirl.execution.scheduler.plan_algorithm import render_algorithm

            print(render_algorithm(graph, cfg))
            paths = show_plan(graph, plan, Path(cfg.trainer.output_dir))
            for kind, path in paths.items():
                print(f"{kind}: {path}")
            return 0
        missing = backend.rollout_unavailable(cfg.actor_rollout_ref.rollout.name)  # planning needs no engine
        if missing:
            raise SiirlUserError(missing)
        from siirl.cluster import check_local_capacity
        from siirl.driver import run_job
        from siirl.execution.scheduler.ray_request import placement_bundles

        check_local_capacity(cfg, placement_bundles(backend, plan.world_size),
                             separate=plan.resolved.schedule.mode == "separate_async")
        resumed = resume_message(cfg)
        if resumed:
            print(resumed)

        return run_job(cfg, backend, plan)
    except SiirlUserError as exc:
        print(f"siirl: error: {exc}", file=sys.stderr)
        return EXIT_USER_ERROR
    except KeyboardInterrupt:
        print("siirl: interrupted; Ray workers shut down", file=sys.stderr)
        return EXIT_INTERRUPTED


def cli() -> None:
    """Console-script entry point (``siirl``)."""
    # SIGTERM before Ray starts ends the launcher as Ctrl-C does (one line, exit 130), not silently with 143;
    # once Ray runs, the driver's InterruptGuard (siirl.cluster) takes both signals over.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    startup_gc.pause()  # the driver's imports and checks (siirl.startup_gc); run_job settles once workers start
    try:
        code = main()
    finally:
        gc.freeze()  # exiting, the interpreter would collect the whole heap (seconds); the process frees it anyway
    sys.exit(code)


if __name__ == "__main__":
    cli()
