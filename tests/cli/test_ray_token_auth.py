"""A Ray that siiRL starts keeps Ray's token authentication, asked for explicitly, so Ray prints no
"Token authentication is enabled" WARNING on the console (Ray warns only when RAY_AUTH_MODE is unset)."""

from __future__ import annotations

import logging
import os

from ray._private.authentication.authentication_token_setup import enable_token_auth_by_default

from siirl import driver
from siirl.config_checks import load_config

_AUTH_KEYS = ("RAY_AUTH_MODE", "RAY_ADDRESS", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH")


def _start_local_ray(monkeypatch, **env: str) -> dict:
    """What the environment says about auth when the driver calls ``ray.init`` for a local Ray."""
    monkeypatch.setattr(os, "environ", {**{k: v for k, v in os.environ.items() if k not in _AUTH_KEYS}, **env})
    seen = {}
    monkeypatch.setattr(driver.ray, "is_initialized", lambda: False)
    monkeypatch.setattr(driver.ray, "init", lambda **kwargs: seen.update(
        mode=os.environ.get("RAY_AUTH_MODE"), token=os.environ.get("RAY_AUTH_TOKEN")))
    monkeypatch.setattr(driver, "OrphanGuard", object)
    driver._init_ray(load_config(["device=cpu"]))
    return seen


def test_a_local_ray_is_started_with_token_auth_asked_for(monkeypatch):
    assert _start_local_ray(monkeypatch)["mode"] == "token"


def test_a_local_ray_gets_a_token_of_its_own_in_the_environment_not_in_home(monkeypatch):
    """No ~/.ray/auth_token: the token rides in the environment Ray's processes inherit, new per job."""
    first = _start_local_ray(monkeypatch)["token"]
    assert first and len(first) == 64 and first != _start_local_ray(monkeypatch)["token"]
    assert _start_local_ray(monkeypatch, RAY_AUTH_TOKEN="mine")["token"] == "mine"
    assert _start_local_ray(monkeypatch, RAY_AUTH_TOKEN_PATH="/secrets/ray")["token"] is None
    assert _start_local_ray(monkeypatch, RAY_AUTH_MODE="disabled")["token"] is None


def test_ray_warns_about_token_auth_only_when_its_mode_is_unset(monkeypatch, caplog):
    monkeypatch.setattr(os, "environ", {**os.environ, "RAY_AUTH_MODE": "token"})
    with caplog.at_level(logging.WARNING):
        assert enable_token_auth_by_default()
    assert not [r for r in caplog.records if "Token authentication" in r.getMessage()]


def test_a_ray_that_fails_to_start_with_no_message_is_named_by_its_error_type(monkeypatch, tmp_path, capsys):
    """Ray raises bare errors at start-up, some with no text: the job still ends in one line, not an IndexError."""
    cfg = load_config(["device=cpu", f"trainer.output_dir={tmp_path}"])

    def refuse(_cfg):
        raise ConnectionError("")

    monkeypatch.setattr(driver, "_init_ray", refuse)
    assert driver.run_job(cfg, None, None) == 1
    assert capsys.readouterr().err.strip() == "siirl: job failed: could not start or join Ray: ConnectionError"
