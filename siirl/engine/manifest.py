"""sha256 manifest of a checkpoint folder: written last, checked before anything in the folder is parsed.

``manifest.json`` lists every file of the folder with its size and sha256. It is written after all ranks
have written their files and before the folder is renamed into place, so a folder with a valid manifest
is complete; a flipped byte, a truncated shard, a swapped-in file or an extra file is refused with the
file's name. Files are hashed from the same bytes that are then parsed, so nothing changes in between.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable
from pathlib import Path

from siirl.errors import CheckpointError

MANIFEST = "manifest.json"
FORMAT = "siirl-checkpoint-manifest-v1"


def _relative_files(folder: Path) -> list[str]:
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file() and p.name != MANIFEST)


def write_manifest(folder: Path) -> None:
    """Hash every file under ``folder`` into ``folder/manifest.json`` (temporary file + ``os.replace``)."""
    entries = {}
    for name in _relative_files(folder):
        data = (folder / name).read_bytes()
        entries[name] = {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    tmp = folder / f".{MANIFEST}.tmp"
    with open(tmp, "w", encoding="utf-8") as handle:
        json.dump({"format": FORMAT, "files": entries}, handle, indent=1, sort_keys=True)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, folder / MANIFEST)


def read_manifest(folder: Path) -> dict[str, dict]:
    """File name -> {bytes, sha256}; a missing or malformed manifest is a ``CheckpointError``."""
    path = folder / MANIFEST
    if not path.is_file():
        raise CheckpointError(f"{path} is missing: the checkpoint is incomplete or not a siiRL checkpoint")
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
        files = manifest["files"]
        ok = manifest.get("format") == FORMAT and all(
            isinstance(v, dict) and isinstance(v.get("sha256"), str) and isinstance(v.get("bytes"), int)
            for v in files.values()
        )
    except (ValueError, KeyError, TypeError, AttributeError, UnicodeDecodeError):
        ok = False
    if not ok:
        raise CheckpointError(f"{path} is not a valid checkpoint manifest (corrupt or tampered)")
    return files


def _find_root(file: Path) -> Path:
    for folder in file.parents:
        if (folder / MANIFEST).is_file():
            return folder
    raise CheckpointError(f"{file} is not inside a checkpoint with a {MANIFEST}")


def _check(folder: Path, name: str, entry: dict, data: bytes) -> bytes:
    if len(data) != entry["bytes"] or hashlib.sha256(data).hexdigest() != entry["sha256"]:
        raise CheckpointError(
            f"checkpoint file {folder / name} does not match its sha256 in {folder / MANIFEST} (corrupt or tampered)"
        )
    return data


def read_verified(file: Path) -> bytes:
    """The bytes of ``file`` after checking them against the manifest of the checkpoint holding it."""
    file = Path(file)
    root = _find_root(file)
    files = read_manifest(root)
    name = file.relative_to(root).as_posix()
    if name not in files:
        raise CheckpointError(f"checkpoint file {file} is not listed in {root / MANIFEST}")
    if not file.is_file():
        raise CheckpointError(f"checkpoint file {file} is missing")
    return _check(root, name, files[name], file.read_bytes())


def verify_folder(folder: Path, names: Iterable[str] | None = None) -> None:
    """Check ``names`` (default: every listed file, and that no unlisted file was added)."""
    files = read_manifest(folder)
    if names is None:
        extra = sorted(set(_relative_files(folder)) - set(files))
        if extra:
            raise CheckpointError(f"checkpoint file {folder / extra[0]} is not listed in {folder / MANIFEST}")
        names = sorted(files)
    for name in names:
        if name not in files:
            raise CheckpointError(f"checkpoint file {folder / name} is not listed in {folder / MANIFEST}")
        if not (folder / name).is_file():
            raise CheckpointError(f"checkpoint file {folder / name} is missing")
        _check(folder, name, files[name], (folder / name).read_bytes())
