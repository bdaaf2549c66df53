"""Layers import downward only, no two siiRL modules import each other (even through others), and every
name -> entry table is a ``siirl.registry.Registry``.

Read from the source with ``ast`` (imports inside functions included), so a lazy import that climbs a layer
or closes a circle fails here naming the file, the line and the import, without importing anything.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "siirl"

#: siiRL's packages from the top floor down. A module may import its own package and the floors below its own,
#: never a package on its floor or above it. The embedded models' builders (``siirl.tasks``) stand above the data
#: loader they encode prompts with; the config loader finds the models through ``siirl.embedded_assets``.
FLOORS: tuple[tuple[str, ...], ...] = (
    ("siirl.main_dag",),
    ("siirl.config_checks", "siirl.driver", "siirl.preflight"),
    ("siirl.dag_worker", "siirl.user_interface"),
    ("siirl.execution",),
    ("siirl.engine",),
    ("siirl.tasks",),
    ("siirl.data_coordinator", "siirl.environment"),
    ("siirl.agent_loops", "siirl.algorithms"),
    ("siirl.agent_loop", "siirl.device", "siirl.native", "siirl.params", "siirl.reward_score"),
)
#: Leaves: path (relative to the repo) -> the only siiRL modules its modules may import.
LEAVES: dict[str, tuple[str, ...]] = {
    "siirl/registry.py": ("siirl.errors",),
    "siirl/user_code.py": (),
    "siirl/ray_names.py": (),
    "siirl/reward_score/": ("siirl.errors", "siirl.registry"),
}


def _modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def _relative(path: Path) -> str:
    return path.relative_to(PACKAGE.parent).as_posix()


def _package_of(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1])  # a module's package; for ``__init__.py`` the package itself


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path, source: str | None = None) -> Iterator[tuple[int, str, list[str]]]:
    """(line, absolute module name, names imported from it) of every import in the file, at any depth."""
    text = path.read_text(encoding="utf-8") if source is None else source
    for node in ast.walk(ast.parse(text, filename=str(path))):
        if isinstance(node, ast.Import):
            yield from ((node.lineno, alias.name, []) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = _package_of(path).split(".")
                anchor = anchor[: len(anchor) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            yield node.lineno, base, [alias.name for alias in node.names]


def imported_modules(path: Path, source: str | None = None) -> list[tuple[int, str]]:
    """(line, absolute module name) of every import in the file (or ``source`` read as that file), at any
    depth: lazy imports inside functions count."""
    return [(line, module) for line, module, _ in _imports(path, source)]


def _within(module: str, package: str) -> bool:
    return module == package or module.startswith(f"{package}.")


def _forbidden() -> dict[str, tuple[str, ...]]:
    """Path prefix (relative to the repo) -> the packages its modules may not import (its floor and above)."""
    forbidden, at_or_above = {}, ()
    for floor in FLOORS:
        at_or_above += floor
        for package in floor:
            prefix = package.replace(".", "/")
            others = tuple(other for other in at_or_above if other != package)
            forbidden.update({f"{prefix}/": others, f"{prefix}.py": others})
    return forbidden


def layer_violations() -> list[str]:
    broken = []
    for path in _modules():
        rel = _relative(path)
        for prefix, forbidden in _forbidden().items():
            if rel.startswith(prefix):
                broken += [
                    f"{rel}:{line} imports {module}"
                    for line, module in imported_modules(path)
                    if any(_within(module, package) for package in forbidden)
                ]
        for prefix, allowed in LEAVES.items():
            if rel.startswith(prefix):
                broken += [
                    f"{rel}:{line} imports {module} (a leaf)"
                    for line, module in imported_modules(path)
                    if _within(module, "siirl")
                    and not _within(module, _module_name(PACKAGE / prefix.removeprefix("siirl/")))
                    and not any(_within(module, ok) for ok in allowed)
                ]
    return broken


def test_layers_import_downward_only():
    assert layer_violations() == []


def import_graph() -> dict[str, set[str]]:
    """siiRL module -> the siiRL modules it imports; ``from package import module`` imports that module."""
    names = {_module_name(path): path for path in _modules()}

    def known(module: str) -> str:
        while module and module not in names:
            module = module.rpartition(".")[0]
        return module

    graph: dict[str, set[str]] = {}
    for name, path in names.items():
        targets: set[str] = set()
        for _, module, imported in _imports(path):
            submodules = {f"{module}.{item}" for item in imported} & names.keys()
            targets |= submodules
            if len(submodules) < len(imported) or not imported:
                targets.add(known(module))
        graph[name] = targets - {"", name}
    return graph


def room_graph() -> dict[str, set[str]]:
    """The import graph with each of siiRL's top-level packages and modules (a room) as one node."""

    def room(module: str) -> str:
        return ".".join(module.split(".")[:2])

    graph: dict[str, set[str]] = {}
    for module, targets in import_graph().items():
        graph.setdefault(room(module), set()).update(room(target) for target in targets)
    return {name: targets - {name} for name, targets in graph.items()}


def import_circles(graph: dict[str, set[str]] | None = None) -> list[str]:
    """Each set of siiRL modules (or of ``graph``'s nodes) that import one another round a loop (Tarjan's
    strongly connected components)."""
    graph, order, low, stack, circles = graph or import_graph(), {}, {}, [], []

    def visit(module: str) -> None:
        order[module] = low[module] = len(order)
        stack.append(module)
        for target in sorted(graph.get(module, ())):
            if target not in order:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in stack:
                low[module] = min(low[module], order[target])
        if low[module] == order[module]:
            members = stack[stack.index(module):]
            del stack[stack.index(module):]
            if len(members) > 1:
                circles.append(" <-> ".join(sorted(members)))

    for module in sorted(graph):
        if module not in order:
            visit(module)
    return circles


def test_no_import_circles():
    assert import_circles() == []


def test_no_circles_between_top_level_packages():
    """No two of siiRL's packages import each other through other modules either, so each stands on one floor."""
    assert import_circles(room_graph()) == []


def _module_dicts(tree: ast.Module) -> set[str]:
    """Names bound at module level to an empty dict (``X = {}``, ``X: dict[...] = {}``, ``X = dict()``)."""
    names = set()
    for node in tree.body:
        target, value = None, None
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        elif isinstance(node, ast.AnnAssign):
            target, value = node.target, node.value
        empty = (isinstance(value, ast.Dict) and not value.keys) or (
            isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "dict"
        )
        if isinstance(target, ast.Name) and empty:
            names.add(target.id)
    return names


def _decorators(tree: ast.Module) -> list[ast.FunctionDef]:
    """Functions returning an inner function: the shape of a ``@register_x(name)`` decorator factory."""
    return [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef) and any(isinstance(inner, ast.FunctionDef) for inner in node.body)
    ]


def hand_rolled_registries() -> list[str]:
    """Module-level dicts filled by a decorator: ``def register_x(name): def wrap(fn): X[name] = fn ...``."""
    found = []
    for path in _modules():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        tables = _module_dicts(tree)
        for factory in _decorators(tree):
            for node in ast.walk(factory):
                targets = node.targets if isinstance(node, ast.Assign) else []
                found += [
                    f"{_relative(path)}:{node.lineno} {factory.name}() fills the dict {target.value.id}"
                    for target in targets
                    if isinstance(target, ast.Subscript)
                    and isinstance(target.value, ast.Name)
                    and target.value.id in tables
                ]
    return found


#: Dict registries whose replacement (the model-role specs) lands separately; delete each when it does.
def test_every_registry_is_a_registry():
    assert hand_rolled_registries() == []


def test_the_checks_find_what_they_look_for(tmp_path, monkeypatch):
    """The scanners are not vacuous: a planted upward import, a leaf's import, a lazy circle, a circle between
    two packages through different modules and a planted dict registry are all named."""
    fake = tmp_path / "siirl"
    (fake / "params").mkdir(parents=True)
    (fake / "registry.py").write_text("from siirl.errors import ConfigError\n")
    (fake / "params" / "bad.py").write_text("def f():\n    from siirl.engine.rollout import ROLLOUT_ENGINES\n")
    (fake / "things.py").write_text(
        "_THINGS: dict = {}\n\n\ndef register_thing(name):\n    def wrap(fn):\n"
        "        _THINGS[name] = fn\n        return fn\n\n    return wrap\n"
    )
    (fake / "reward_score").mkdir()
    (fake / "reward_score" / "gsm8k.py").write_text("from siirl.reward_score.registry import SCORES\nimport siirl.user_files\n")
    (fake / "tools.py").write_text("import siirl.helpers\n")
    (fake / "helpers.py").write_text("def f():\n    from siirl import tools\n")
    for package, imported in (("shelf", "siirl.drawer.inside"), ("drawer", "siirl.shelf.top")):
        (fake / package).mkdir()
        (fake / package / "top.py").write_text("")
        (fake / package / "inside.py").write_text(f"import {imported}\n" if package == "shelf" else "")
        (fake / package / "uses.py").write_text(f"import {imported}\n" if package == "drawer" else "")
    monkeypatch.setitem(globals(), "PACKAGE", fake)
    assert layer_violations() == [
        "siirl/params/bad.py:2 imports siirl.engine.rollout",
        "siirl/reward_score/gsm8k.py:2 imports siirl.user_files (a leaf)",
    ]
    assert import_circles() == ["siirl.helpers <-> siirl.tools"]
    assert import_circles(room_graph()) == ["siirl.drawer <-> siirl.shelf", "siirl.helpers <-> siirl.tools"]
    assert hand_rolled_registries() == ["siirl/things.py:6 register_thing() fills the dict _THINGS"]


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("from .loader import x\n", "siirl.params.loader"),
        ("from ..engine import y\n", "siirl.engine"),
        ("import siirl.device.registry\n", "siirl.device.registry"),
    ],
)
def test_relative_imports_resolve_against_the_files_package(source, expected):
    assert imported_modules(PACKAGE / "params" / "probe.py", source) == [(1, expected)]
