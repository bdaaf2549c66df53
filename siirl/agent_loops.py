"""verl's agent-loop file (``actor_rollout_ref.rollout.agent.agent_loop_config_path``), checked before Ray.

verl registers agent loops by name: its own (``single_turn_agent``, ``tool_agent``) by decorator, a user's in a
YAML list of ``{name, _target_}`` read at start-up; each row runs the loop its ``agent_name`` column names, else
``default_agent_loop``. Here the rollout is chosen once per run: verl's two built-in loops are siiRL's plain
and multi-turn (tool) rollouts (``default_agent_loop`` picks between them), so a file may name them; any other
loop (an ``AgentLoopBase`` subclass of the user's, verl's langgraph recipe) is refused in one line naming it,
or, when its module cannot import, the package it needs.
"""

from __future__ import annotations

import importlib
from pathlib import Path

import yaml

from siirl.errors import ConfigError

KEY = "actor_rollout_ref.rollout.agent.agent_loop_config_path"
#: verl's built-in loops: registered name -> the class verl's files name as ``_target_``.
BUILTIN_LOOPS = {
    "single_turn_agent": "verl.experimental.agent_loop.single_turn_agent_loop.SingleTurnAgentLoop",
    "tool_agent": "verl.experimental.agent_loop.tool_agent_loop.ToolAgentLoop",
}


def read_agent_loops(path: str) -> dict[str, str]:
    """name -> ``_target_`` of every loop the file lists; one line when it is not such a list."""
    file = Path(path).expanduser()
    try:
        entries = yaml.safe_load(file.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f"bad config: {KEY}={path}: cannot read it ({' '.join(str(exc).split())})") from None
    if not isinstance(entries, list) or not all(isinstance(e, dict) and e.get("name") and e.get("_target_")
                                                 for e in entries):
        raise ConfigError(f"bad config: {KEY}={path} must be a YAML list of loops, each with name and _target_")
    return {str(e["name"]): str(e["_target_"]) for e in entries}


def _missing_package(target: str) -> str | None:
    """The top-level package ``target``'s module needs and cannot import, or None when it imports."""
    module = target.rsplit(".", 1)[0]
    try:
        importlib.import_module(module)
    except ModuleNotFoundError as exc:
        return (exc.name or module).split(".")[0]
    return None


def check_agent_loops(path: str | None) -> None:
    """Every loop the file names is one of verl's built-in loops; a user loop is refused in one line."""
    if not path:
        return
    for name, target in read_agent_loops(path).items():
        if target in BUILTIN_LOOPS.values():
            continue
        missing = None if target.startswith("verl.") else _missing_package(target)
        if missing is not None:
            raise ConfigError(
                f"bad config: {KEY}={path}: agent loop {name!r} ({target}) needs the {missing} package, which is "
                f"not installed (pip install {missing})"
            )
        raise ConfigError(
            f"bad config: {KEY}={path}: agent loop {name!r} ({target}) is a user agent loop, which is not "
            f"implemented; verl's {' and '.join(BUILTIN_LOOPS)} run as siiRL's rollouts (default_agent_loop)"
        )
