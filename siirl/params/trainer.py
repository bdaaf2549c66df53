"""``trainer.*`` (run length, placement, checkpoints, logging) and ``dag.*``."""

from dataclasses import dataclass, field
from typing import Optional


@dataclass
class TrainerConfig:
    #: Set by the ``device`` config group: auto | cpu | cuda | npu
    device: str = "auto"
    nnodes: int = 1
    #: DAG workers (devices) per node; alias n_gpus_per_node for verl users (takes precedence if > 0).
    n_devices_per_node: int = 2
    n_gpus_per_node: int = 0
    total_epochs: int = 1
    #: Stop after this many steps; -1 = run the epochs out.
    total_training_steps: int = -1
    project_name: str = "siirl"
    experiment_name: str = "grpo_tiny"
    #: Everything a run writes (metrics, TensorBoard, checkpoints, plots) lands under here.
    output_dir: str = "outputs/${trainer.project_name}/${trainer.experiment_name}"
    #: console | jsonl | tensorboard
    logger: list[str] = field(default_factory=lambda: ["console", "jsonl", "tensorboard"])
    save_freq: int = -1
    test_freq: int = 50
    val_before_train: bool = True
    #: auto | disable | <checkpoint dir>
    resume_mode: str = "auto"
    max_ckpt_to_keep: int = 2
    seed: int = 1
    #: Existing Ray cluster to join (RAY_ADDRESS also works); empty = start a local one.
    ray_address: str = ""
    #: Log level of the DAG workers (the SIIRL_LOG_LEVEL environment variable wins); per-step detail
    #: goes to metrics.jsonl / TensorBoard and the driver's progress bar either way.
    log_level: str = "WARNING"
    #: Intra-op threads of each DAG worker; 0 = the node's cores divided by its workers (no oversubscription).
    cpu_threads_per_worker: int = 0


@dataclass
class DagConfig:
    #: "module:function" returning a TaskGraph; replaces the built-in pipeline choice (null/empty: none).
    custom_pipeline_fn: Optional[str] = ""  # noqa: UP045 - OmegaConf reads Optional, not "str | None"
    #: A workflow YAML (configs/workflows/*.yaml format) to run instead of a built-in pipeline.
    workflow_path: Optional[str] = ""  # noqa: UP045
    #: Multi-agent graphs: auto | own (each agent on its own share of the DAG workers) | shared (every
    #: worker holds every agent); auto = own when the workers split equally among the agents.
    agent_placement: str = "auto"
