"""The one ``Registry``: its re-registration rule, user-code imports, metadata and config-key checks."""

from __future__ import annotations

import pytest

import siirl.registry
from siirl.errors import ConfigError
from siirl.registry import Registry, governed_keys, registries


@pytest.fixture(autouse=True)
def _private_registry_index(monkeypatch):
    """Registries made here stay out of the index that config validation reads."""
    monkeypatch.setattr(siirl.registry, "_ALL", dict(siirl.registry._ALL))


def first(x):
    return x


def second(x):
    return x


def test_same_object_again_is_a_no_op_another_is_refused_unless_replaced():
    reg: Registry = Registry("test thing (rules)")
    reg.register("a", "b", colour="red")(first)
    reg.register("a", colour="red")(first)
    with pytest.raises(ValueError, match="test thing \\(rules\\) 'a' is already registered to <function first"):
        reg.register("a")(second)
    assert reg.get("a") is first
    reg.register("a", replace=True, colour="blue")(second)
    assert reg.get("a") is second and reg.get("b") is first
    assert reg.metadata("a") == {"colour": "blue"} and reg.metadata("b") == {"colour": "red"}
    assert reg.names() == ["a", "b"] and [name for name, _ in reg.items()] == ["a", "b"]


def test_unknown_name_is_one_line_listing_the_entries():
    reg: Registry = Registry("test thing (unknown)")
    reg.register("x", "y")(first)
    with pytest.raises(ConfigError, match=r"^unknown test thing \(unknown\) 'z'; registered: x, y$"):
        reg.get("z")
    with pytest.raises(ConfigError, match="unknown"):
        reg.metadata("z")


def test_open_registry_imports_module_function_from_user_code():
    reg: Registry = Registry("test thing (open)", open=True)
    assert reg.get("os.path:join") is __import__("os.path").path.join
    assert reg.metadata("os.path:join") == {}
    assert reg.names() == []  # imported entries are not listed as registered names
    with pytest.raises(ConfigError, match="'no_such_module_xyz:f' cannot be imported"):
        reg.get("no_such_module_xyz:f")
    with pytest.raises(ConfigError, match="is a int, not a function"):
        reg.get("os:SEEK_SET")
    closed: Registry = Registry("test thing (closed)")
    with pytest.raises(ConfigError, match="unknown"):
        closed.get("os.path:join")


def test_check_config_lists_entries_and_also_allowed_values():
    reg: Registry = Registry("test thing (config)", config_keys=("x.kind",), also_allowed=("auto",))
    reg.register("one")(first)
    reg.check_config("x.kind", "auto")
    reg.check_config("x.kind", ["one", "auto"])
    with pytest.raises(ConfigError) as info:
        reg.check_config("x.kind", ["one", "two"])
    assert str(info.value) == (
        "bad config: x.kind='two': unknown test thing (config) 'two'; registered: one; also allowed: auto"
    )
    assert governed_keys()["x.kind"] is reg and registries()["test thing (config)"] is reg


def test_a_key_governed_twice_is_refused():
    Registry("test thing (twice a)", config_keys=("x.twice",))
    Registry("test thing (twice b)", config_keys=("x.twice",))
    with pytest.raises(ValueError, match="x.twice is governed by both"):
        governed_keys()
