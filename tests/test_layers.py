"""Layers import downward only, and every name -> entry table is a ``siirl.registry.Registry``.

Read from the source with ``ast`` (imports inside functions included), so a lazy import that climbs a layer
fails here naming the file, the line and the import, without importing anything.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "siirl"

#: Path prefix (relative to the repo) -> packages its modules may not import.
FORBIDDEN: dict[str, tuple[str, ...]] = {
    "siirl/params/": (
        "siirl.algorithms",
        "siirl.config_checks",
        "siirl.dag_worker",
        "siirl.data_coordinator",
        "siirl.device",
        "siirl.driver",
        "siirl.engine",
        "siirl.environment",
        "siirl.execution",
        "siirl.main_dag",
        "siirl.preflight",
    ),
    "siirl/engine/": ("siirl.dag_worker", "siirl.driver", "siirl.main_dag", "siirl.preflight"),
}
#: The registry module is a leaf: siiRL modules it may import.
REGISTRY_MAY_IMPORT = ("siirl.errors",)


def _modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def _relative(path: Path) -> str:
    return path.relative_to(PACKAGE.parent).as_posix()


def _package_of(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1])  # a module's package; for ``__init__.py`` the package itself


def imported_modules(path: Path, source: str | None = None) -> list[tuple[int, str]]:
    """(line, absolute module name) of every import in the file (or ``source`` read as that file), at any
    depth: lazy imports inside functions count."""
    found = []
    text = path.read_text(encoding="utf-8") if source is None else source
    for node in ast.walk(ast.parse(text, filename=str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = _package_of(path).split(".")
                anchor = anchor[: len(anchor) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            found += [(node.lineno, base)]
    return found


def _within(module: str, package: str) -> bool:
    return module == package or module.startswith(f"{package}.")


def layer_violations() -> list[str]:
    broken = []
    for path in _modules():
        rel = _relative(path)
        for prefix, forbidden in FORBIDDEN.items():
            if rel.startswith(prefix):
                broken += [
                    f"{rel}:{line} imports {module}"
                    for line, module in imported_modules(path)
                    if any(_within(module, package) for package in forbidden)
                ]
    registry = PACKAGE / "registry.py"
    broken += [
        f"{_relative(registry)}:{line} imports {module} (the registry is a leaf)"
        for line, module in imported_modules(registry)
        if _within(module, "siirl") and not any(_within(module, ok) for ok in REGISTRY_MAY_IMPORT)
    ]
    return broken


def test_layers_import_downward_only():
    assert layer_violations() == []


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
    """The scanners are not vacuous: a planted lazy import and a planted dict registry are both named."""
    fake = tmp_path / "siirl"
    (fake / "params").mkdir(parents=True)
    (fake / "registry.py").write_text("from siirl.errors import ConfigError\n")
    (fake / "params" / "bad.py").write_text("def f():\n    from siirl.engine.rollout import ROLLOUT_ENGINES\n")
    (fake / "things.py").write_text(
        "_THINGS: dict = {}\n\n\ndef register_thing(name):\n    def wrap(fn):\n"
        "        _THINGS[name] = fn\n        return fn\n\n    return wrap\n"
    )
    monkeypatch.setitem(globals(), "PACKAGE", fake)
    assert layer_violations() == ["siirl/params/bad.py:2 imports siirl.engine.rollout"]
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
