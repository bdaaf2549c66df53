"""A Ray that siiRL starts keeps Ray's token authentication, asked for explicitly, so Ray prints no
"Token authentication is enabled" WARNING on the console (Ray warns only when RAY_AUTH_MODE is unset)."""

from __future__ import annotations

import logging
import os

from ray._private.authentication.authentication_token_setup import enable_token_auth_by_default

from siirl import driver
from siirl.config_checks import load_config


def test_a_local_ray_is_started_with_token_auth_asked_for(monkeypatch):
    monkeypatch.setattr(os, "environ", {k: v for k, v in os.environ.items() if k not in ("RAY_AUTH_MODE", "RAY_ADDRESS")})
    seen = {}
    monkeypatch.setattr(driver.ray, "is_initialized", lambda: False)
    monkeypatch.setattr(driver.ray, "init", lambda **kwargs: seen.update(mode=os.environ.get("RAY_AUTH_MODE")))
    monkeypatch.setattr(driver, "OrphanGuard", object)
    driver._init_ray(load_config(["device=cpu"]))
    assert seen == {"mode": "token"}


def test_ray_warns_about_token_auth_only_when_its_mode_is_unset(monkeypatch, caplog):
    monkeypatch.setattr(os, "environ", {**os.environ, "RAY_AUTH_MODE": "token"})
    with caplog.at_level(logging.WARNING):
        assert enable_token_auth_by_default()
    assert not [r for r in caplog.records if "Token authentication" in r.getMessage()]
