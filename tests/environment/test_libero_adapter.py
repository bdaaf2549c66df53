"""The LIBERO adapter driven through a fake of LIBERO's modules (the simulator is not installed here)."""

import sys

import numpy as np
import pytest
import yaml

from siirl.environment import make_env
from siirl.environment.libero import write_default_libero_config
from siirl.errors import SiirlUserError


@pytest.fixture
def fake_libero(monkeypatch, repo_root, tmp_path):
    monkeypatch.setenv("LIBERO_CONFIG_PATH", str(tmp_path / "libero_config"))
    monkeypatch.syspath_prepend(str(repo_root / "tests" / "fakes"))
    for name in [m for m in sys.modules if m == "libero" or m.startswith("libero.")]:
        monkeypatch.delitem(sys.modules, name)
    import libero.libero as module

    module.CALLS.clear()
    yield module
    for name in [m for m in sys.modules if m == "libero" or m.startswith("libero.")]:
        sys.modules.pop(name, None)


def test_libero_episode_reaches_goal(fake_libero):
    env = make_env("libero", suite="libero_spatial", camera_size=64, num_steps_wait=2)
    first = env.reset({"index": 0}, seed=7)
    obs = first.observation
    assert obs["instruction"] == "move the gripper to goal 0"
    assert obs["agentview_image"].shape == (64, 64, 3)
    assert ("seed", 7) in fake_libero.CALLS
    _, bddl, h, w = next(c for c in fake_libero.CALLS if c[0] == "init")
    assert bddl.endswith("libero_spatial/libero_spatial_task_0.bddl") and (h, w) == (64, 64)
    result = first
    for _ in range(20):
        direction = np.array([0.05, 0.0, 0.0]) - result.observation["robot0_eef_pos"]
        action = np.concatenate([np.clip(direction / 0.05, -1, 1), np.zeros(3), [1.0]])
        result = env.step(action)
        if result.done:
            break
    assert result.done and result.success and result.reward == 1.0
    env.close()
    assert fake_libero.CALLS[-1] == ("close",)


def test_libero_budget_bad_action_and_suite(fake_libero):
    env = make_env("libero", suite="libero_object", max_steps=2, num_steps_wait=0)
    env.reset({"index": 3, "task_id": 1}, seed=None)
    assert not env.step([0.0] * 7).done
    last = env.step([0.0] * 7)
    assert last.done and not last.success
    with pytest.raises(ValueError, match="7-D"):
        env.step([0.0] * 3)
    with pytest.raises(SiirlUserError, match="unknown LIBERO suite"):
        make_env("libero", suite="libero_nope")


def test_libero_missing_is_one_clear_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "libero", None)
    with pytest.raises(SiirlUserError, match=r"siirl\[embodied\]"):
        make_env("libero")


def test_libero_gets_its_default_config_instead_of_prompting(fake_libero, tmp_path, repo_root):
    """Importing LIBERO without ``$LIBERO_CONFIG_PATH/config.yaml`` asks on the terminal (a Ray worker has
    none): the adapter writes LIBERO's own default answer, its package folders, and leaves a user's file be."""
    make_env("libero", suite="libero_spatial")
    config = tmp_path / "libero_config" / "config.yaml"
    paths = yaml.safe_load(config.read_text())
    root = repo_root / "tests" / "fakes" / "libero" / "libero"
    assert paths["bddl_files"] == str(root / "bddl_files") and paths["assets"] == str(root / "assets")
    config.write_text("bddl_files: /mine\n")
    assert write_default_libero_config() is None and config.read_text() == "bddl_files: /mine\n"


def test_missing_libero_assets_are_one_clear_error(fake_libero, monkeypatch):
    """LIBERO from PyPI fetches its scene assets from the Hub on first use; without them the simulator cannot
    be built (what happens on a machine without that access)."""
    from libero.libero import envs

    def no_assets(**_):
        raise FileNotFoundError(2, "No such file or directory", "/site/libero/libero/assets/scenes/base.xml")

    monkeypatch.setattr(envs, "OffScreenRenderEnv", no_assets)
    env = make_env("libero", suite="libero_spatial")
    with pytest.raises(SiirlUserError, match=r"assets/scenes/base.xml is missing \(LIBERO from PyPI downloads"):
        env.reset({"index": 0})
