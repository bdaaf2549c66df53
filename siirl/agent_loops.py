"""Which agent loops a run has, loaded the way verl loads them, and checked before Ray.

verl registers loops by name: by decorator (``register``) and in the YAML list of ``{name, _target_, ...}``
that ``actor_rollout_ref.rollout.agent.agent_loop_config_path`` names; each row runs the loop its
``agent_name`` column names, else ``default_agent_loop``. verl's two built-in loops keep their siiRL
rollouts when a run names nothing else: ``single_turn_agent`` is the plain rollout, ``tool_agent`` the
multi-turn tool rollout. A run with a loop of the user's (or verl's langgraph recipe) runs the agent-loop
rollout (siirl.engine.rollout.agent_loop_rollout), where ``single_turn_agent`` rows run beside the user's.

Kept free of torch: the planner asks :func:`runs_agent_loops` before any worker starts.
"""

from __future__ import annotations

import importlib
import inspect
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

from siirl.errors import ConfigError
from siirl.params.root import EXTERNAL_LIB_KEY, external_libs
from siirl.registry import import_user_modules

KEY = "actor_rollout_ref.rollout.agent.agent_loop_config_path"
DEFAULT_KEY = "actor_rollout_ref.rollout.agent.default_agent_loop"
#: verl's built-in loops: registered name -> the class verl's files name as ``_target_``.
BUILTIN_LOOPS = {
    "single_turn_agent": "verl.experimental.agent_loop.single_turn_agent_loop.SingleTurnAgentLoop",
    "tool_agent": "verl.experimental.agent_loop.tool_agent_loop.ToolAgentLoop",
}
#: The run-wide multi-turn tool rollout: not a loop that rows can mix with others.
TOOL_AGENT = "tool_agent"
#: What a verl loop imports, and the siiRL module serving the same names (the one-line change).
VERL_MODULES = {
    "verl.experimental.agent_loop": "siirl.agent_loop",
    "recipe.langgraph_agent": "siirl.agent_loop.langgraph",
}
#: Packages an optional extra of siiRL installs, by import name.
EXTRAS = {"langgraph": "agents", "langchain_core": "agents"}


@dataclass(frozen=True)
class LoopSpec:
    """A loop as the rollout builds it: the class and the extra keys of its file entry."""

    name: str
    cls: type
    kwargs: dict[str, Any] = field(default_factory=dict)


def _read(path: str) -> tuple[tuple[str, str, tuple[tuple[str, Any], ...]], ...]:
    """The file's entries, read again when it changed (the planner asks often; a warm worker outlives a job)."""
    try:
        stat = Path(path).expanduser().stat()
    except OSError:
        return _read_version(path, None)
    return _read_version(path, (stat.st_mtime_ns, stat.st_size))


@lru_cache(maxsize=16)
def _read_version(path: str, version: tuple[int, int] | None) -> tuple[tuple[str, str, tuple[tuple[str, Any], ...]], ...]:
    file = Path(path).expanduser()
    try:
        entries = yaml.safe_load(file.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f"bad config: {KEY}={path}: cannot read it ({' '.join(str(exc).split())})") from None
    if not isinstance(entries, list) or not all(isinstance(e, dict) and e.get("name") and e.get("_target_")
                                                 for e in entries):
        raise ConfigError(f"bad config: {KEY}={path} must be a YAML list of loops, each with name and _target_")
    return tuple(
        (str(e["name"]), str(e["_target_"]), tuple((k, v) for k, v in e.items() if k not in ("name", "_target_")))
        for e in entries
    )


def read_agent_loops(path: str) -> dict[str, str]:
    """name -> ``_target_`` of every loop the file lists; one line when it is not such a list."""
    return {name: target for name, target, _ in _read(str(path))}


def runs_agent_loops(agent: Any) -> bool:
    """Whether the run needs the agent-loop rollout (``agent``: the ``rollout.agent`` section): its default
    loop is not one of verl's built-in ones, or its file lists a loop that is not."""
    if agent.default_agent_loop not in (None, *BUILTIN_LOOPS):
        return True
    path = agent.agent_loop_config_path
    return bool(path) and any(t not in BUILTIN_LOOPS.values() for t in read_agent_loops(str(path)).values())


def _refuse(name: str, target: str, why: str) -> ConfigError:
    return ConfigError(f"bad config: agent loop {name!r} ({target}) {why}")


def _import_error(name: str, target: str, exc: ModuleNotFoundError) -> ConfigError:
    missing = (exc.name or "").split(".")[0]
    verl = [(theirs, ours) for theirs, ours in VERL_MODULES.items() if theirs.split(".")[0] == missing]
    if verl:
        change = "; ".join(f"`from {theirs} import ...` -> `from {ours} import ...`" for theirs, ours in verl)
        return _refuse(name, target, f"imports {missing}, which siiRL does not ship: change its import ({change})")
    extra = EXTRAS.get(missing)
    install = f"pip install 'siirl[{extra}]'" if extra else f"pip install {missing}"
    return _refuse(name, target, f"needs the {missing} package, which is not installed ({install})")


def locate_loop(name: str, target: str) -> type:
    """The class ``target`` (``package.module.Class`` or ``module:Class``) names, checked to be an agent loop."""
    from siirl.agent_loop.base import AgentLoopBase

    module_name, _, attr = target.rpartition(":") if ":" in target else target.rpartition(".")
    if not module_name:
        raise _refuse(name, target, "is not a `package.module.Class` path")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        raise _import_error(name, target, exc) from None
    except Exception as exc:  # noqa: BLE001 - the user's module may raise anything at import
        reason = ' '.join(str(exc).split())
        raise _refuse(name, target, f"cannot be imported ({type(exc).__name__}: {reason})") from None
    cls = getattr(module, attr, None)
    if not isinstance(cls, type):
        raise _refuse(name, target, f"is not a class of module {module_name}")
    if not issubclass(cls, AgentLoopBase):
        raise _refuse(name, target, "does not subclass siirl.agent_loop.AgentLoopBase (a verl loop: change "
                      "`from verl.experimental.agent_loop import ...` to `from siirl.agent_loop import ...`)")
    if not inspect.iscoroutinefunction(cls.run):
        raise _refuse(name, target, "must define `async def run(self, sampling_params, **kwargs)`")
    return cls


def load_agent_loops(agent: Any) -> dict[str, LoopSpec]:
    """Every loop the run can run: the registered ones (siiRL's ``single_turn_agent``, the user's
    ``register``-ed classes), then the file's entries (a file entry wins over a registered name, as in verl).
    verl's ``tool_agent`` is the run-wide tool rollout, not a loop here."""
    from siirl.agent_loop.base import AGENT_LOOPS

    loops = {name: LoopSpec(name, cls) for name, cls in AGENT_LOOPS.items()}
    if agent.agent_loop_config_path:
        for name, target, extra in _read(str(agent.agent_loop_config_path)):
            if target == BUILTIN_LOOPS.get(name):
                continue
            loops[name] = LoopSpec(name, locate_loop(name, target), dict(extra))
    return loops


def check_agent_loops(cfg: Any) -> None:
    """Before Ray: the file reads, every loop it lists imports and is an agent loop, and the default loop
    names one; one line each. Runs with verl's built-in loops alone keep their rollouts."""
    agent = cfg.actor_rollout_ref.rollout.agent
    if agent.agent_loop_config_path:
        read_agent_loops(str(agent.agent_loop_config_path))
    if not runs_agent_loops(agent):
        return
    import_user_modules(external_libs(cfg), EXTERNAL_LIB_KEY)  # the loops they register count
    loops = load_agent_loops(agent)
    default = agent.default_agent_loop or "single_turn_agent"
    if default == TOOL_AGENT:
        raise ConfigError(
            f"bad config: {DEFAULT_KEY}=tool_agent runs the multi-turn tool rollout for the whole run, which does "
            f"not mix with the agent loops of {KEY}; make the default one of: {', '.join(sorted(loops))}"
        )
    if default not in loops:
        raise ConfigError(
            f"bad config: {DEFAULT_KEY}={default} names no agent loop; registered: {', '.join(sorted(loops))} "
            f"(a loop registers by @register in a module of actor_rollout_ref.model.external_lib, or in {KEY})"
        )
    if not cfg.data.return_raw_chat:
        raise ConfigError(
            "bad config: agent loops read each row's chat (raw_prompt), which needs data.return_raw_chat=true"
        )


def check_agent_names(cfg: Any, rows: Any) -> None:
    """Every row's ``agent_name`` (``rows``: a dataset's :class:`ParquetRows`) names a loop the run has: verl
    fails on the first such row mid-run, here it is one line before Ray. A run of verl's built-in loops alone
    takes their names only (its rollout is run-wide)."""
    agent = cfg.actor_rollout_ref.rollout.agent
    known = set(load_agent_loops(agent)) if runs_agent_loops(agent) else set(BUILTIN_LOOPS)
    for first, columns in rows.iter_columns(["agent_name"]):
        for offset, name in enumerate(columns["agent_name"]):
            if name is not None and name not in known:
                raise ConfigError(
                    f"{rows.describe(first + offset)} names agent loop {name!r} in its agent_name column; this "
                    f"run's loops: {', '.join(sorted(known))} ({DEFAULT_KEY}, {KEY})"
                )
