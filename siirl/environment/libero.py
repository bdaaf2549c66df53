"""``libero``: the LIBERO manipulation benchmark (robosuite / MuJoCo) behind the ``Env`` contract.

Written against LIBERO's own API (``libero.libero.benchmark``, ``get_libero_path``,
``libero.libero.envs.OffScreenRenderEnv``); installed by ``pip install siirl[embodied]`` (LIBERO 0.1.1 from
PyPI, or ``pip install -e <LIBERO checkout>``). The PyPI package ships no scene and object assets: its first
environment downloads them from the Hugging Face Hub (or reads a checkout's ``libero/libero/assets``). Headless
rendering needs ``MUJOCO_GL=osmesa`` (and the OSMesa library) or ``egl``. The tests drive the adapter through
a faithful fake of those modules (docs/agents.md says what was run against the real package).

LIBERO asks on the terminal where its files are when ``$LIBERO_CONFIG_PATH/config.yaml`` (default
``~/.libero``) is missing, which a Ray worker cannot answer; the adapter writes the answer LIBERO itself
writes by default (its package folders) before importing it.

A task is a row with ``task_id`` (index in the suite) and optionally ``trial_id`` (which of the suite's
fixed initial states); both fall back to the row's ``index``. Following the usual LIBERO evaluation
protocol, an episode starts from the fixed initial state, waits ``num_steps_wait`` no-op steps for the
objects to settle, then runs at most ``max_steps`` policy actions (7-D end-effector delta + gripper).
The observation is the dict of camera images and proprioception plus the task's language instruction.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from siirl.environment.base import StepResult
from siirl.environment.registry import register_env
from siirl.errors import SiirlUserError

#: Episode budgets per suite used by the standard LIBERO evaluation.
MAX_STEPS = {"libero_spatial": 220, "libero_object": 280, "libero_goal": 300, "libero_10": 520, "libero_90": 400}
NOOP_ACTION = [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, -1.0]


def write_default_libero_config() -> Path | None:
    """``$LIBERO_CONFIG_PATH/config.yaml`` (default ``~/.libero``) with LIBERO's default folders when it is
    missing, so importing LIBERO does not prompt; None when it exists or LIBERO is not installed."""
    folder = Path(os.environ.get("LIBERO_CONFIG_PATH", "~/.libero")).expanduser()
    config = folder / "config.yaml"
    try:
        spec = importlib.util.find_spec("libero.libero")
    except ImportError:
        return None
    if config.exists() or spec is None or spec.origin is None:
        return None
    root = Path(spec.origin).parent
    paths = {
        "benchmark_root": root, "bddl_files": root / "bddl_files", "init_states": root / "init_files",
        "datasets": root.parent / "datasets", "assets": root / "assets",
    }
    folder.mkdir(parents=True, exist_ok=True)
    config.write_text(yaml.safe_dump({key: str(path) for key, path in paths.items()}))
    return config


def _import_libero() -> tuple[Any, Any, Any]:
    write_default_libero_config()
    try:
        libero = importlib.import_module("libero.libero")
        benchmark = importlib.import_module("libero.libero.benchmark")
        envs = importlib.import_module("libero.libero.envs")
    except ImportError as exc:
        raise SiirlUserError(f"env.name=libero needs LIBERO ({exc}); run: pip install siirl[embodied]") from exc
    return libero.get_libero_path, benchmark, envs.OffScreenRenderEnv


@register_env("libero")
class LiberoEnv:
    def __init__(
        self,
        suite: str = "libero_spatial",
        camera_size: int = 256,
        max_steps: int = 0,
        num_steps_wait: int = 10,
    ) -> None:
        get_libero_path, benchmark, self._env_cls = _import_libero()
        suites = benchmark.get_benchmark_dict()
        if suite not in suites:
            raise SiirlUserError(f"unknown LIBERO suite {suite!r}; available: {', '.join(sorted(suites))}")
        self.suite = suites[suite]()
        self.bddl_root = get_libero_path("bddl_files")
        self.camera_size, self.num_steps_wait = camera_size, num_steps_wait
        self.max_steps = max_steps or MAX_STEPS.get(suite, 300)
        self._env: Any = None
        self._task_key: tuple[int, ...] | None = None
        self._language = ""
        self._steps = 0

    def _open(self, task_id: int) -> None:
        """One simulator per task; reused across episodes of the same task."""
        if self._task_key == (task_id,):
            return
        if self._env is not None:
            self._env.close()
        task = self.suite.get_task(task_id)
        bddl = os.path.join(self.bddl_root, task.problem_folder, task.bddl_file)
        try:
            self._env = self._env_cls(
                bddl_file_name=bddl, camera_heights=self.camera_size, camera_widths=self.camera_size
            )
        except FileNotFoundError as exc:  # the PyPI package's assets come from the Hub on first use
            raise SiirlUserError(
                f"LIBERO cannot build task {task_id} of its suite: {exc.filename} is missing (LIBERO from PyPI "
                "downloads its scene assets from the Hugging Face Hub on first use; without access, copy a LIBERO "
                "checkout's libero/libero/assets into the installed package)"
            ) from exc
        self._language, self._task_key = task.language, (task_id,)

    def _observation(self, obs: Mapping[str, Any]) -> dict[str, Any]:
        return {**obs, "instruction": self._language}

    def reset(self, task: Mapping[str, Any], seed: int | None = None) -> StepResult:
        index = int(task.get("index", 0) or 0)
        task_id = int(task.get("task_id", index % self.suite.get_num_tasks()))
        self._open(task_id)
        init_states = self.suite.get_task_init_states(task_id)
        trial = int(task.get("trial_id", index)) % len(init_states)
        if seed is not None:
            self._env.seed(seed)
        self._env.reset()
        obs = self._env.set_init_state(init_states[trial])
        for _ in range(self.num_steps_wait):
            obs, _, _, _ = self._env.step(NOOP_ACTION)
        self._steps = 0
        return StepResult(self._observation(obs), info={"task_id": task_id, "trial_id": trial})

    def step(self, action: Any) -> StepResult:
        action = [float(x) for x in (action.tolist() if hasattr(action, "tolist") else action)]
        if len(action) != 7:
            raise ValueError(f"LIBERO actions are 7-D (xyz, rpy, gripper), got {len(action)} values")
        obs, reward, done, info = self._env.step(action)
        self._steps += 1
        success = bool(done)
        finished = success or self._steps >= self.max_steps
        out_info = {**dict(info or {}), "success": success, "progress": 1.0 if success else 0.0}
        return StepResult(self._observation(obs), reward=float(reward), done=finished, info=out_info)

    def close(self) -> None:
        if self._env is not None:
            self._env.close()
            self._env = None
            self._task_key = None
