"""Read the files a user names (workflow, config and tool YAML, reward modules, dataset classes) with bounds.

A path in a config can point anywhere: ``/dev/zero`` would be read until memory runs out, a FIFO blocks the
launcher forever, and a few lines of YAML aliases ("billion laughs") expand into billions of nodes once
OmegaConf copies them. So a user's file must be a regular file below a size limit, and its YAML must parse
with the safe loader into a tree whose size, counted with aliases expanded, stays bounded. Each refusal is
one line naming the file and what it is.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import stat
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml

from siirl.errors import ConfigError, SiirlUserError

#: Largest file the launcher reads: far above any real config or reward module.
MAX_FILE_BYTES = 8 * 1024 * 1024
#: Largest YAML tree, counted with every alias expanded (a 10k-line config is about 30k nodes).
MAX_YAML_NODES = 1_000_000

_KINDS = {
    stat.S_ISDIR: "a directory",
    stat.S_ISFIFO: "a FIFO (named pipe)",
    stat.S_ISCHR: "a character device",
    stat.S_ISBLK: "a block device",
    stat.S_ISSOCK: "a socket",
}


def check_regular_file(path: str | Path, what: str, max_bytes: int = MAX_FILE_BYTES) -> None:
    """Refuse a missing path, anything that is not a regular file, or one larger than ``max_bytes``,
    by looking at it (stat never blocks, unlike opening a FIFO)."""
    try:
        info = os.stat(path)
    except FileNotFoundError:
        raise ConfigError(f"{what} {path}: file not found") from None
    except OSError as exc:
        raise ConfigError(f"{what} {path}: {exc.strerror or exc}") from None
    for is_kind, kind in _KINDS.items():
        if is_kind(info.st_mode):
            raise ConfigError(f"{what} {path} is {kind}, not a regular file")
    if info.st_size > max_bytes:
        raise ConfigError(f"{what} {path} is {info.st_size} bytes; the limit is {max_bytes} bytes")


def read_user_text(path: str | Path, what: str, max_bytes: int = MAX_FILE_BYTES) -> str:
    """The file's text, read no further than the limit even if the file grows while it is read."""
    check_regular_file(path, what, max_bytes)
    with open(path, "rb") as handle:
        data = handle.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise ConfigError(f"{what} {path} is larger than the limit of {max_bytes} bytes")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{what} {path} is not UTF-8 text (byte {exc.start})") from None


def _expanded_size(root: yaml.Node, limit: int) -> int:
    """Nodes in the tree with aliases expanded; an alias is the same node object reached twice, so each
    node's size is computed once and reused (iteratively: deep nesting must not exhaust the stack)."""
    sizes: dict[int, int] = {}
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        if id(node) in sizes:
            continue
        children = _children(node)
        if children_done or not children:
            total = 1 + sum(sizes[id(child)] for child in children)
            if total > limit:
                return total
            sizes[id(node)] = total
            continue
        stack.append((node, True))
        stack.extend((child, False) for child in children if id(child) not in sizes)
    return sizes[id(root)]


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


def parse_user_yaml(text: str, where: str, max_nodes: int = MAX_YAML_NODES) -> Any:
    """Plain YAML only: python tags and alias bombs are refused in one line naming ``where``."""
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
        if root is not None and _expanded_size(root, max_nodes) > max_nodes:
            raise ConfigError(f"{where}: YAML expands to more than {max_nodes} nodes through its aliases")
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{where}: invalid YAML ({_yaml_reason(exc)})") from None
    except RecursionError:
        raise ConfigError(f"{where}: YAML is nested too deeply") from None


def _yaml_reason(exc: yaml.YAMLError) -> str:
    """PyYAML's message spread over several lines, said in one, with the line it points at."""
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    mark = getattr(exc, "problem_mark", None)
    return f"line {mark.line + 1}: {problem}" if mark is not None else " ".join(str(problem).split())


def load_user_yaml(path: str | Path, what: str) -> Any:
    """A user's YAML file read and parsed within the bounds above."""
    return parse_user_yaml(read_user_text(path, what), f"{what} {path}")


#: More YAML files than any config tree holds (verl's has about 60): past it, the folder is not a config tree.
MAX_CONFIG_FILES = 1000


def class_entries(path: str, key: str, section: str, what: str) -> list[tuple[str, dict[str, Any]]]:
    """The entries under ``section`` of a YAML file of class entries (verl's tool and interaction files),
    each a mapping with a ``class_name``, with the ``where`` its own error lines start with. An empty path,
    a missing or empty list, or an entry without a class name is one line naming ``key``."""
    if not path:
        raise ConfigError(f"bad config: {key} is empty; give the path of {what}")
    document = load_user_yaml(path, f"bad config: {key}:")
    entries = document.get(section) if isinstance(document, dict) else None
    if not isinstance(entries, list) or not entries:
        raise ConfigError(f"bad config: {key}={path!r} must hold a non-empty list under {section!r}")
    located = []
    for index, entry in enumerate(entries):
        where = f"bad config: {key}={path!r}: {section}[{index}]"
        if not isinstance(entry, dict) or not isinstance(entry.get("class_name"), str) or not entry["class_name"]:
            raise ConfigError(f"{where} needs a class_name")
        located.append((where, entry))
    return located


def check_config_folder(folder: Path) -> None:
    """Every YAML file Hydra may load from ``--config-path`` (the primary and its ``defaults`` options) passes
    the bounds above before Hydra reads any of them: Hydra's own loader has no limits."""
    files = sorted(path for path in folder.rglob("*.yaml") if not any(p.startswith(".") for p in path.parts))
    if len(files) > MAX_CONFIG_FILES:
        raise ConfigError(f"--config-path {folder} holds more than {MAX_CONFIG_FILES} YAML files; name the config folder")
    for path in files:
        load_user_yaml(path, "config file")


#: Loading a name from a user's Python file (a reward function, a dataset class), as verl does for
#: ``custom_reward_function.path`` and ``data.custom_cls.path``. The file runs once per process: it is imported
#: under a name derived from its path, so what it defines keeps one identity however often it is looked up
#: (the reward manager's worker processes unpickle a reward function for every call).


def import_user_file(path: str, key: str) -> Any:
    """The module of the Python file ``path`` (``key``: the config key that named it, for errors)."""
    module_name = "siirl_user_file_" + hashlib.sha1(path.encode()).hexdigest()[:12]
    if module_name in sys.modules:
        return sys.modules[module_name]
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise ConfigError(f"{key}: cannot load {path} as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        sys.modules.pop(module_name, None)
        raise ConfigError(f"{key}: {path} failed to import: {type(exc).__name__}: {exc}") from exc
    return module


def load_from_user_file(path: str, name: str, section: str) -> Any:
    """``name`` as defined in the file ``path`` (``section.path`` / ``section.name`` named them)."""
    key = f"{section}.path"
    if not path:
        raise ConfigError(f"{key} is empty; give the path of a .py file")
    check_regular_file(path, f"{key}:")
    if not path.endswith(".py"):
        raise ConfigError(f"{key} must be a .py file, got {path}")
    module = import_user_file(path, key)
    if not hasattr(module, name):
        defined = sorted(k for k, v in vars(module).items() if callable(v) and not k.startswith("_"))
        raise ConfigError(f"{section}.name: {name!r} not found in {path} (callables there: {defined})")
    return getattr(module, name)


def check_output_dir(raw: str, key: str = "trainer.output_dir") -> None:
    """The first existing ancestor of the folder ``key`` names is a directory we can create files in."""
    path = Path(raw).expanduser().absolute()
    existing = next(p for p in (path, *path.parents) if p.exists())
    if not existing.is_dir():
        raise SiirlUserError(f"{key}={raw}: {existing} is not a directory")
    try:
        with tempfile.TemporaryFile(dir=existing):
            pass
    except OSError as exc:
        raise SiirlUserError(f"{key}={raw}: cannot write in {existing} ({exc.strerror})") from None
