"""Compose the run config with Hydra's compose API and turn every mistake into one readable line.

This layer checks what the schema and the value tables of ``siirl.params`` can see; the checks against the
registries of the packages above (estimators, engines, devices, ...) are added by
``siirl.config_checks.load_config``, the entry point every caller uses.

We use ``compose`` rather than ``@hydra.main`` so that Hydra writes nothing into the working directory
(no ``outputs/`` or ``.hydra/``): a run writes only under ``trainer.output_dir``.
"""

from __future__ import annotations

import copy
import functools
import os
import tempfile
from pathlib import Path
from typing import Any

from hydra import compose, initialize_config_dir
from hydra.errors import HydraException
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from siirl.errors import ConfigError, SiirlUserError
from siirl.params.defaults import fill_embedded_defaults, fill_embodied_policy
from siirl.params.micro_batch_keys import resolve_micro_batches
from siirl.params.override_screen import screen_overrides
from siirl.params.rollout_keys import resolve_rollout_lengths
from siirl.params.root import SiirlConfig, register_schema
from siirl.params.rules import validate_sections
from siirl.params.schema_keys import schema_keys
from siirl.params.siirl_embodied_layout import layout_config_name, translate_embodied_layout
from siirl.params.tree_screen import screen_tree
from siirl.params.validate import refuse_unsupported
from siirl.params.verl_keys import apply_verl_keys
from siirl.user_files import check_config_folder

PRIMARY_CONFIG = "siirl"


def config_dir() -> Path:
    """The YAML tree: the repo's ``configs/`` in a checkout, the packaged copy in an installed wheel."""
    override = os.environ.get("SIIRL_CONFIG_DIR")
    candidates = [Path(override)] if override else []
    here = Path(__file__).resolve().parent.parent
    candidates += [here.parent / "configs", here / "configs"]
    for candidate in candidates:
        if (candidate / f"{PRIMARY_CONFIG}.yaml").is_file():
            return candidate
    raise ConfigError(f"no {PRIMARY_CONFIG}.yaml found in any of: {', '.join(map(str, candidates))}")


def _one_line(exc: BaseException) -> str:
    """OmegaConf messages carry 'full_key: ...' lines; keep the root cause's first line and name the key."""
    cause = exc
    while cause.__cause__ is not None:
        cause = cause.__cause__
    lines = [line.strip() for line in str(cause).splitlines() if line.strip()]
    if len(lines) > 1 and lines[0].endswith("while composing config:"):
        lines = lines[1:]  # Hydra's wrapper line; the next one says what is wrong
    first = lines[0] if lines else type(cause).__name__
    key = getattr(cause, "full_key", None)
    if key and key not in first:
        first = f"{first} (key: {key})"
    return first


def _explain_group_error(message: str) -> str:
    """Hydra's 'Could not find device/tpu' lists options over several lines; say it in one, naming the
    group's YAML files (each ``configs/<group>/<name>.yaml`` is what makes ``<group>=<name>`` valid)."""
    for group in ("device", "task"):
        if f"{group}/" in message:
            wanted = message.split(f"{group}/", 1)[1].split("'")[0].split()[0]
            valid = sorted(path.stem for path in (config_dir() / group).glob("*.yaml"))
            return f"unknown {group} '{wanted}'; valid {group}s: {', '.join(valid)}"
    return message


#: List-valued keys that also accept one plain value, as verl does (``data.train_files=/x.parquet``,
#: ``trainer.logger=console``).
PATH_LIST_KEYS = ("data.train_files", "data.val_files", "trainer.logger")


def _listify_override(override: str) -> str:
    """``data.train_files=/x.parquet`` -> ``data.train_files=[/x.parquet]``; other overrides unchanged."""
    key, sep, value = override.partition("=")
    if sep and key.lstrip("+") in PATH_LIST_KEYS and value and not value.lstrip().startswith("["):
        return f"{key}=[{value}]"
    return override


def _listify_paths(tree: dict[str, Any]) -> None:
    for dotted in PATH_LIST_KEYS:
        section, _, leaf = dotted.partition(".")
        node = tree.get(section)
        if isinstance(node, dict) and isinstance(node.get(leaf), str):
            node[leaf] = [node[leaf]] if node[leaf] else []


def _user_config(config_path: str, config_name: str) -> dict[str, Any]:
    """The user's YAML file composed in its own directory (its ``defaults`` list is honoured)."""
    folder = Path(config_path).expanduser().resolve()
    if not (folder / f"{config_name.removesuffix('.yaml')}.yaml").is_file():
        raise ConfigError(f"--config-name {config_name}: no such file in --config-path {folder}")
    return copy.deepcopy(_composed_file(str(folder), config_name.removesuffix(".yaml"), _yaml_fingerprint(folder)))


def _yaml_fingerprint(folder: Path) -> tuple:
    """Every YAML file under ``folder`` with its size and modification time: an edited tree composes anew. A
    file that cannot be read (a dangling link) is only named here: the folder check says what is wrong with it."""
    return tuple(sorted((str(path), _stamp(path)) for path in folder.rglob("*.yaml")))


def _stamp(path: Path) -> tuple[int, int] | None:
    try:
        stat = path.stat()
    except OSError:
        return None
    return stat.st_mtime_ns, stat.st_size


@functools.lru_cache(maxsize=16)
def _composed_file(folder: str, name: str, fingerprint: tuple) -> dict[str, Any]:
    """One YAML tree checked (every file parsed for what a user file may not hold) and composed by Hydra: a
    second or two for verl's trees, most of a launch's config time. Once per process for jobs that share the
    tree: a sweep of many jobs over one tree (an option sweep in a notebook, the test suite's replays of
    published scripts). A tree that fails its check is not kept, and is checked again next time."""
    check_config_folder(Path(folder))
    with initialize_config_dir(config_dir=folder, version_base=None):
        tree = OmegaConf.to_container(compose(config_name=name))
    tree.pop("hydra", None)
    _listify_paths(tree)
    return tree


def _drop_targets(node: Any) -> bool:
    """verl's YAML names the dataclass each section instantiates (``_target_: verl....Config``); siiRL's
    schema is the typed tree already, so those entries carry nothing here. Everything else in the file
    follows the same rules as a command-line override. True when one named a verl class: the tree is verl's."""
    verl = False
    if isinstance(node, dict):
        verl = str(node.pop("_target_", "")).startswith("verl.")
        for value in node.values():
            verl = _drop_targets(value) or verl
    elif isinstance(node, list):
        for value in node:
            verl = _drop_targets(value) or verl
    return verl


def _primary_with(user: dict[str, Any], folder: Path, device_chosen: bool) -> None:
    """Write into ``folder`` a primary config: siiRL's defaults list and values, the user's file on top.
    A ``device=`` group chosen on the command line is applied after the file: verl's tree writes
    ``trainer.device: cuda``, and the command line wins over a file."""
    import yaml

    base = yaml.safe_load((config_dir() / f"{PRIMARY_CONFIG}.yaml").read_text(encoding="utf-8")) or {}
    defaults = base.pop("defaults", [])
    if device_chosen:
        device = [entry for entry in defaults if isinstance(entry, dict) and "device" in entry]
        defaults = [entry for entry in defaults if entry not in device] + device
    merged = OmegaConf.to_container(OmegaConf.merge(OmegaConf.create(base), OmegaConf.create(user)))
    (folder / f"{PRIMARY_CONFIG}.yaml").write_text(yaml.safe_dump({"defaults": defaults, **merged}))
    for group in config_dir().iterdir():
        if group.is_dir():
            (folder / group.name).symlink_to(group, target_is_directory=True)


def _compose(overrides: list[str], config_path: str | None, config_name: str | None) -> DictConfig:
    if config_name is None:
        with initialize_config_dir(config_dir=str(config_dir()), version_base=None):
            return compose(config_name=PRIMARY_CONFIG, overrides=overrides)
    user = _user_config(config_path or ".", config_name)
    verl_tree = _drop_targets(user)
    refuse_unsupported(overrides, user)
    user = screen_tree(user, schema_keys(SiirlConfig), verl_tree)
    with tempfile.TemporaryDirectory(prefix="siirl_config_") as folder:
        _primary_with(user, Path(folder), any(o.partition("=")[0] == "device" for o in overrides))
        with initialize_config_dir(config_dir=folder, version_base=None):
            return compose(config_name=PRIMARY_CONFIG, overrides=overrides)


def _embedded_asset(relative: str) -> str:
    """``${siirl_asset:tiny_qwen2_vl}`` in a preset: the shipped file or folder (an error if it is missing)."""
    from siirl.embedded_assets import asset_path

    return asset_path(relative)


def _refuse_blank(overrides: list[str]) -> None:
    """A blank argument usually comes from ``\\ `` (backslash, space) in a shell script: bash passes the space
    and ends the command there, so the lines below it never reached the run; say so instead of a parser error."""
    for position, override in enumerate(overrides, start=1):
        if not override.strip():
            raise ConfigError(
                f"bad config: argument {position} is blank ({override!r}); in a shell script a backslash followed "
                "by a space (e.g. before a '#' comment) passes a space and ends the command there"
            )


def compose_config(
    overrides: list[str] | None = None, config_path: str | None = None, config_name: str | None = None
) -> SiirlConfig:
    """Compose ``configs/siirl.yaml`` (with the user's ``config_path/config_name`` YAML on top, as Hydra's
    ``--config-path/--config-name`` do) and the command-line overrides; check it; return the typed tree.

    Checks and defaults run on the composed ``DictConfig``; the result is converted ONCE into the
    ``SiirlConfig`` dataclasses, so every consumer reads typed attributes and the object pickles as is
    (it travels to the Ray workers)."""
    register_schema()
    OmegaConf.register_new_resolver("siirl_asset", _embedded_asset, replace=True)
    groups = [path.name for path in config_dir().iterdir() if path.is_dir()]
    overrides = [_listify_override(o) for o in overrides or []]
    _refuse_blank(overrides)
    refuse_unsupported(overrides, None)  # a Megatron script is told so, not about the megatron.* keys it sets
    config_name = layout_config_name(overrides, config_path, config_name)
    overrides = screen_overrides(translate_embodied_layout(overrides), schema_keys(SiirlConfig), groups)
    try:
        # Hydra composes onto the typed schema (siirl_schema), and every key reaching it has passed the
        # screen (overrides) or the tree screen (a user's YAML), so the composed tree is the typed one as is.
        cfg = _compose(overrides, config_path, config_name)
        OmegaConf.resolve(cfg)
    except (HydraException, OmegaConfBaseException) as exc:
        if isinstance(exc.__context__, SiirlUserError):  # a preset's ${siirl_asset:...} names a missing file
            raise exc.__context__ from None
        message = _one_line(exc)
        headline = str(exc).splitlines()[0] if str(exc) else ""
        if "Could not find" in headline or "Could not load" in headline:
            message = _explain_group_error(headline)
        elif headline.startswith("Could not override"):
            message = f"cannot set {headline.split()[3].rstrip('.')}: {message}"
        raise ConfigError(f"bad config: {message}") from None
    apply_verl_keys(cfg)
    fill_embodied_policy(cfg)
    validate_sections(cfg, SiirlConfig)  # each section's rules; the first broken one raises
    resolve_micro_batches(cfg)
    resolve_rollout_lengths(cfg)
    fill_embedded_defaults(cfg)
    return OmegaConf.to_object(cfg)
