"""verl's agent-loop keys: ``default_agent_loop`` picks siiRL's plain or multi-turn (tool) rollout; an
``agent_loop_config_path`` naming verl's built-in loops is accepted, a user loop (or verl's langgraph recipe
without langgraph) is refused in one line before Ray."""

import sys

import pytest

from siirl.config_checks import load_config
from siirl.errors import ConfigError

AGENT = "actor_rollout_ref.rollout.agent."
BUILTIN = """- name: single_turn_agent
  _target_: verl.experimental.agent_loop.single_turn_agent_loop.SingleTurnAgentLoop
- name: tool_agent
  _target_: verl.experimental.agent_loop.tool_agent_loop.ToolAgentLoop
"""


@pytest.mark.parametrize(("loop", "multi_turn"), [("single_turn_agent", False), ("tool_agent", True)])
def test_default_agent_loop_picks_the_rollout(loop, multi_turn):
    cfg = load_config([f"{AGENT}default_agent_loop={loop}"])
    assert cfg.actor_rollout_ref.rollout.multi_turn.enable is multi_turn


def test_a_file_of_verls_builtin_loops_is_accepted(tmp_path):
    path = tmp_path / "agent.yaml"
    path.write_text(BUILTIN)
    cfg = load_config([f"{AGENT}agent_loop_config_path={path}", f"{AGENT}default_agent_loop=tool_agent"])
    assert cfg.actor_rollout_ref.rollout.agent.agent_loop_config_path == str(path)


@pytest.fixture
def user_modules(tmp_path, monkeypatch):
    (tmp_path / "graph_loop.py").write_text("import langgraph_stand_in_absent\nclass ReactAgentLoop:\n    pass\n")
    (tmp_path / "my_loop.py").write_text("class MyLoop:\n    pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    for name in ("graph_loop", "my_loop"):
        sys.modules.pop(name, None)


@pytest.mark.parametrize(
    ("target", "needle"),
    [
        ("graph_loop.ReactAgentLoop", "needs the langgraph_stand_in_absent package, which is not installed"),
        ("my_loop.MyLoop", "agent loop 'react' (my_loop.MyLoop) is a user agent loop, which is not implemented"),
        ("verl.recipe.other.Loop", "is a user agent loop"),
    ],
)
def test_a_user_loop_is_refused_in_one_line_naming_it(user_modules, target, needle):
    path = user_modules / "agent.yaml"
    path.write_text(f"- name: react\n  _target_: {target}\n")
    with pytest.raises(ConfigError) as raised:
        load_config([f"{AGENT}agent_loop_config_path={path}"])
    assert needle in str(raised.value) and "\n" not in str(raised.value)


def test_a_file_that_is_not_a_list_of_loops_is_one_line(tmp_path):
    path = tmp_path / "agent.yaml"
    path.write_text("name: react\n")
    with pytest.raises(ConfigError, match="must be a YAML list of loops, each with name and _target_"):
        load_config([f"{AGENT}agent_loop_config_path={path}"])
