"""The LIBERO adapter on the real simulator (``pip install -e ".[libero]"``; ci/tier_libero.sh runs these).
The same behaviours as ``test_libero_adapter.py`` drives through the fake, plus faults that only a real
simulator process shows: a worker that dies or hangs mid-episode, and MuJoCo's own divergence handling."""

from __future__ import annotations

import os
import signal

import numpy as np
import pytest

from siirl.environment import VectorEnv, libero_setup, make_env

pytestmark = pytest.mark.skipif(libero_setup.libero_package() is None, reason="LIBERO is not installed")

SMALL = {"suite": "libero_spatial", "camera_size": 32, "num_steps_wait": 1, "max_steps": 6}


@pytest.fixture(scope="module")
def env():
    env = make_env("libero", **SMALL)
    yield env
    env.close()


def test_an_episode_on_the_real_simulator(env):
    first = env.reset({"index": 1}, seed=3)
    assert first.info == {"task_id": 1, "trial_id": 1}
    obs = first.observation
    assert obs["agentview_image"].shape == (32, 32, 3) and obs["agentview_image"].std() > 0  # a rendered scene
    assert obs["instruction"].startswith("pick up the black bowl")
    package = libero_setup.libero_package()
    assert (package / "assets").resolve() == libero_setup.assets_folder().resolve()
    config = os.path.join(os.environ["LIBERO_CONFIG_PATH"], "config.yaml")
    assert os.path.isfile(config) and os.environ["LIBERO_CONFIG_PATH"] != os.path.expanduser("~/.libero")
    start = obs["robot0_eef_pos"].copy()
    chunk = env.step(np.array([[0.0, 0.0, 1.0, 0, 0, 0, -1.0]] * 4))
    assert not chunk.done and chunk.observation["robot0_eef_pos"][2] > start[2]  # four steps up
    last = env.step([[0.0] * 6 + [-1.0]] * 4)
    assert last.done and not last.success and last.info["task_id"] == 1  # max_steps 6 ends it mid-chunk


def test_mujoco_divergence_ends_only_that_episode(env):
    """MuJoCo resets a diverged state in place and raises a warning count; the adapter ends the episode."""
    env.reset({"index": 0}, seed=None)
    qvel = env._env.env.sim.data.qvel
    qvel[:] = np.nan
    result = env.step([[0.0] * 6 + [-1.0]])
    assert result.done and result.failed and "the simulation became unstable (" in result.info["error"]
    assert env.reset({"index": 0}, seed=None).observation["agentview_image"].shape == (32, 32, 3)


def test_a_crashed_and_a_hung_simulator_process_are_bounded_and_named(caplog):
    """Two simulator processes: one killed, one stopped mid-episode; the step ends both episodes within the
    bound, each with one line naming the environment and what happened."""
    with VectorEnv("libero", 2, SMALL, num_workers=2, timeout_s=300.0) as venv:
        assert not any(r.failed for r in venv.reset([{"index": 0}, {"index": 1}], [None, None]))
        venv.timeout_s = 3.0
        os.kill(venv._workers[0].process.pid, signal.SIGKILL)
        os.kill(venv._workers[1].process.pid, signal.SIGSTOP)
        crashed, hung = venv.step({0: [[0.0] * 6 + [-1.0]], 1: [[0.0] * 6 + [-1.0]]})
    assert crashed.done and crashed.failed and hung.done and hung.failed
    assert "environment 'libero': its worker process died during step" in crashed.info["error"]
    assert "environment 'libero' step timed out after 3s" in hung.info["error"]
    lines = [r.getMessage() for r in caplog.records if "environment 'libero'" in r.getMessage()]
    assert len(lines) == 2 and not any("\n" in line for line in lines)
