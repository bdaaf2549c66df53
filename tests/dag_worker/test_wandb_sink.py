"""The wandb sink with the real package: without an API key it logs offline into the run directory and
says so once; the run carries verl's project and experiment names."""

import logging

import pytest

from siirl.dag_worker.metrics import MetricsLogger, RunInfo, wandb_mode

pytest.importorskip("wandb")


@pytest.fixture
def no_wandb_env(monkeypatch):
    for name in ("WANDB_API_KEY", "WANDB_MODE", "WANDB_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def test_offline_without_api_key_logs_into_the_run_dir(tmp_path, no_wandb_env, caplog):
    with caplog.at_level(logging.WARNING, logger="siirl.metrics"):
        log = MetricsLogger(tmp_path, ["wandb"], enabled=True, run=RunInfo("proj", "exp1", {"seed": 1}))
        run = log.sinks[0].run
        assert (run.project, run.name) == ("proj", "exp1")
        log.log(1, {"reward/mean": 0.25})
        log.log(2, {"reward/mean": 0.5})
        log.close()
    notices = [r.getMessage() for r in caplog.records if "offline" in r.getMessage()]
    assert len(notices) == 1 and "no WANDB_API_KEY" in notices[0] and str(tmp_path / "wandb") in notices[0]
    assert list((tmp_path / "wandb").glob("offline-run-*/run-*.wandb"))


def test_mode_falls_back_to_offline_when_the_server_is_unreachable(no_wandb_env):
    no_wandb_env.setenv("WANDB_API_KEY", "x" * 40)
    no_wandb_env.setenv("WANDB_BASE_URL", "http://127.0.0.1:9")
    mode, why = wandb_mode()
    assert mode == "offline" and "unreachable" in why


def test_explicit_wandb_mode_wins(no_wandb_env):
    no_wandb_env.setenv("WANDB_MODE", "disabled")
    assert wandb_mode() == ("disabled", "")
