"""The fake LIBERO (``tests/fakes/libero``) installed into a temporary folder, with a stand-in for the asset
wheels, so the adapter's own set-up (config file, assets link) runs on it as on the real package."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path


def install_fake_libero(monkeypatch, tmp_path: Path, repo_root: Path):
    from siirl.environment import libero_setup

    site = tmp_path / "site"
    shutil.copytree(repo_root / "tests" / "fakes" / "libero", site / "libero")
    assets = tmp_path / "asset_wheels" / "assets"
    (assets / "scenes").mkdir(parents=True)
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setattr(libero_setup, "SIMULATOR", ())
    monkeypatch.setattr(libero_setup, "ASSET_PARTS", ())
    monkeypatch.setattr(libero_setup, "assets_folder", lambda: assets)
    for name in ("LIBERO_CONFIG_PATH", "MUJOCO_GL", "PYOPENGL_PLATFORM"):  # restored after the test
        monkeypatch.setenv(name, "")
        monkeypatch.delenv(name)
    for name in [m for m in sys.modules if m == "libero" or m.startswith("libero.")]:
        monkeypatch.delitem(sys.modules, name)
    import libero.libero as module

    module.CALLS.clear()
    return module


def forget_fake_libero() -> None:
    for name in [m for m in sys.modules if m == "libero" or m.startswith("libero.")]:
        sys.modules.pop(name, None)
