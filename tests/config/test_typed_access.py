"""The config is read as typed attributes everywhere: no dotted-string readers with restated defaults, and
no OmegaConf access to the loaded config outside ``siirl/params`` (where the loader builds the tree)."""

import ast
from pathlib import Path

import siirl

PACKAGE = Path(siirl.__file__).resolve().parent
PARAMS = PACKAGE / "params"
#: Dotted-key readers that restated defaults instead of reading the typed tree.
DOTTED_READERS = {"cfg_get", "config_value"}
#: OmegaConf calls that would read or rebuild the config as a DictConfig.
OMEGACONF_CALLS = {"select", "update", "to_container", "create"}


def _called_name(call: ast.Call) -> str | None:
    func = call.func
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None


def _offences(source: str, in_params: bool) -> set[str]:
    """What ``source`` does that the rule forbids; OmegaConf calls are allowed inside ``siirl/params``."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in DOTTED_READERS:
            found.add(f"defines {node.name}")
        elif isinstance(node, ast.Call) and _called_name(node) in DOTTED_READERS:
            found.add(f"calls {_called_name(node)}")
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id == "OmegaConf"
            and node.func.attr in OMEGACONF_CALLS
            and not in_params
        ):
            found.add(f"calls OmegaConf.{node.func.attr}")
    return found


def test_no_dotted_config_reads_outside_the_loader():
    offences = {
        f"{path.relative_to(PACKAGE.parent)}: {what}"
        for path in sorted(PACKAGE.rglob("*.py"))
        for what in _offences(path.read_text(encoding="utf-8"), PARAMS in path.parents)
    }
    assert offences == set()


def test_the_check_sees_what_it_forbids():
    source = "def cfg_get(c, k, d=None):\n    return OmegaConf.select(c, k)\n\nconfig_value(1, 'a')\n"
    assert _offences(source, in_params=False) == {"defines cfg_get", "calls config_value", "calls OmegaConf.select"}
    assert _offences(source, in_params=True) == {"defines cfg_get", "calls config_value"}
