"""``trainer.*`` (run length, placement, checkpoints, logging) and ``dag.*``."""

from dataclasses import dataclass, field
from typing import Any, Optional

from siirl.params.async_training import TrainerV1Config
from siirl.params.rules import FINITE_NON_NEGATIVE, NON_NEGATIVE, POSITIVE, checked, one_of, or_null, refused


def world_size(cfg: Any) -> int:
    """DAG workers of the run (``trainer.nnodes`` x devices per node, ``n_gpus_per_node`` first): the
    data-parallel size of a model sharded over all of them."""
    per_node = cfg.trainer.n_gpus_per_node or cfg.trainer.n_devices_per_node
    return int(cfg.trainer.nnodes) * int(per_node)


@dataclass
class TrainerConfig:
    #: Set by the ``device`` config group: auto | cpu | cuda | npu
    device: str = "auto"
    nnodes: int = checked(1, POSITIVE)
    #: DAG workers (devices) per node; alias n_gpus_per_node for verl users (takes precedence if > 0).
    n_devices_per_node: int = checked(2, POSITIVE)
    n_gpus_per_node: int = 0
    total_epochs: int = checked(1, POSITIVE)
    #: Stop after this many steps; -1 = run the epochs out.
    total_training_steps: int = -1
    #: Name the run in the metric sinks that know projects (wandb), as in verl.
    project_name: str = "siirl"
    experiment_name: str = "grpo_tiny"
    #: Everything a run writes (metrics, TensorBoard, checkpoints, plots) lands under here.
    output_dir: str = "outputs/${trainer.project_name}/${trainer.experiment_name}"
    #: console | jsonl | file (verl's file logger) | tensorboard | wandb (pip install siirl[wandb]; offline into
    #: <output_dir>/wandb without WANDB_API_KEY or network)
    logger: list[str] = field(default_factory=lambda: ["console", "jsonl", "tensorboard"])
    save_freq: int = -1
    test_freq: int = 50
    val_before_train: bool = True
    #: auto | disable | <checkpoint dir> | resume_path (verl's spelling: resume from ``resume_from_path``)
    resume_mode: str = "auto"
    #: verl's explicit checkpoint folder to resume from, read only with ``resume_mode=resume_path``.
    resume_from_path: Optional[str] = None  # noqa: UP045 - OmegaConf reads Optional, not "str | None"
    #: Newest checkpoints kept; <= 0 keeps all.
    max_ckpt_to_keep: int = 2
    #: verl's retention keys: when set they replace max_ckpt_to_keep. A step is checkpointed atomically
    #: (actor and critic together), so the two must agree.
    max_actor_ckpt_to_keep: Optional[int] = None  # noqa: UP045
    max_critic_ckpt_to_keep: Optional[int] = None  # noqa: UP045
    #: verl's checkpoint folder; empty = <output_dir>/checkpoints.
    default_local_dir: str = ""
    #: verl's critic warm-up: the first N steps train only the critic (rollout and critic run, the actor
    #: update is skipped), so the value estimates settle before they steer the policy.
    critic_warmup: int = checked(0, NON_NEGATIVE)
    seed: int = 1
    #: Existing Ray cluster to join (RAY_ADDRESS also works); empty = start a local one.
    ray_address: str = ""
    #: Log level of the DAG workers (the SIIRL_LOG_LEVEL environment variable wins); per-step detail
    #: goes to metrics.jsonl / TensorBoard and the driver's progress bar either way.
    log_level: str = checked("WARNING", one_of("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"))
    #: verl's: the first N validation samples of each validation pass (prompt, response, score) go to
    #: <output_dir>/val_generations.jsonl; 0 = none.
    log_val_generations: int = checked(0, NON_NEGATIVE)
    #: verl's DAPO FP8 recipe key: each step, write the response tokens whose rollout and actor log-probs
    #: differ most (needs rollout.calculate_log_probs) to <dump_high_diff_dir>/step_<n>_rank_<r>.jsonl.
    dump_high_diff_tokens: bool = False
    #: Where those dumps go; empty = <output_dir>/high_diff_tokens.
    dump_high_diff_dir: str = ""
    #: verl's: balance the token loads of the data-parallel ranks wherever samples move between stages (the
    #: C++ partitioner keeps a prompt's responses together); false deals the prompts' groups out in order.
    balance_batch: bool = True
    #: verl's: delete the local checkpoint after resuming from it. siiRL keeps it (retention is
    #: max_ckpt_to_keep); true is refused.
    del_local_ckpt_after_load: bool = refused(
        False, lambda v: v is True,
        "is not supported; siiRL keeps checkpoints it resumed from (trainer.max_ckpt_to_keep prunes them)",
    )
    #: verl's switch between its two worker implementations (auto | enable | disable); siiRL has one, so
    #: every value means the same here.
    use_legacy_worker_impl: str = checked("auto", one_of("auto", "enable", "disable"))
    #: Intra-op threads of each DAG worker; 0 = the node's cores divided by its workers (no oversubscription).
    cpu_threads_per_worker: int = checked(0, NON_NEGATIVE)
    #: Seconds without progress from any DAG worker before the driver warns, naming the ranks silent the
    #: longest; at twice this the job ends (exit 1). null = follow the job's step times (10 x the median step,
    #: at least 2 x the longest and 120 s; 1800 s until the first step ends); 0 = never.
    stall_timeout_s: Optional[float] = checked(  # noqa: UP045
        None, or_null(FINITE_NON_NEGATIVE, "null (follow the step times) or >= 0")
    )
    #: Training steps in a row whose actor (or critic) update was skipped entirely for a non-finite loss or
    #: gradient norm before the job ends in one line naming the step; 0 = never.
    max_nonfinite_steps: int = checked(3, NON_NEGATIVE)
    #: verl's V1 trainer: ``trainer_mode`` sync | colocate_async | separate_async (siirl.params.async_training).
    v1: TrainerV1Config = field(default_factory=TrainerV1Config)


@dataclass
class InsertedNodeConfig:
    """One entry of ``dag.insert_nodes``: a node run right after node ``after`` of the run's graph (see
    ``siirl.execution.dag.Pipeline.insert_after``); the other keys are ``Pipeline.add_node``'s."""

    after: str = ""
    node_id: str = ""
    #: ``module:function`` or ``module:Class.method``
    func: str = ""
    node_type: str = "COMPUTE"
    node_role: str = "DEFAULT"
    only_forward_compute: bool = False
    config: dict[str, Any] = field(default_factory=dict)
    #: The node's contract when its function declares none (null: not declared).
    reads: Optional[list[str]] = None  # noqa: UP045
    writes: Optional[list[str]] = None  # noqa: UP045
    roles: Optional[list[str]] = None  # noqa: UP045


@dataclass
class DagConfig:
    #: "module:function" returning a TaskGraph; replaces the built-in pipeline choice (null/empty: none).
    custom_pipeline_fn: Optional[str] = ""  # noqa: UP045 - OmegaConf reads Optional, not "str | None"
    #: A workflow YAML (configs/workflows/*.yaml format) to run instead of a built-in pipeline.
    workflow_path: Optional[str] = ""  # noqa: UP045
    #: Nodes inserted into the run's graph (built-in, custom or workflow file), each right after a named node,
    #: in list order, instead of copying the graph to add them.
    insert_nodes: list[InsertedNodeConfig] = field(default_factory=list)
    #: Multi-agent graphs: auto | own (each agent on its own share of the DAG workers) | shared (every
    #: worker holds every agent); auto = own when the workers split equally among the agents.
    agent_placement: str = checked("auto", one_of("auto", "own", "shared"))


#: verl's default ``global_profiler.save_path``; left at it, traces go under the run's output folder.
DEFAULT_PROFILE_PATH = "outputs/profile"


@dataclass
class GlobalProfilerConfig:
    """verl's ``global_profiler.*``: ``tool=torch`` runs torch's profiler around the steps in ``steps`` (null:
    every step) on every rank (siirl.dag_worker.step_profiler). verl's other tools (nsys, npu, torch_memory)
    drive CUDA / Ascend tools siiRL does not wrap and are refused."""

    tool: Optional[str] = refused(  # noqa: UP045 - OmegaConf reads Optional, not "str | None"
        None, lambda v: v not in (None, "torch"),
        "is not supported; verl's nsys, npu and torch_memory profilers drive CUDA/Ascend tools siiRL does "
        "not wrap; use torch (a trace per profiled step, every device) or the timings in metrics.jsonl",
    )
    steps: Optional[list[int]] = None  # noqa: UP045
    profile_continuous_steps: bool = False
    save_path: str = DEFAULT_PROFILE_PATH
    global_tool_config: dict[str, Any] = field(default_factory=dict)
