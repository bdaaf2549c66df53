"""verl's agent-loop keys, checked before Ray: ``default_agent_loop`` picks siiRL's plain or multi-turn (tool)
rollout, or a user's loop (registered by decorator in an ``external_lib`` module, or listed with ``_target_``
in ``agent_loop_config_path``) and then the agent-loop rollout; each bad loop is one line naming it."""

import sys

import pytest

from siirl.agent_loops import load_agent_loops
from siirl.config_checks import load_config
from siirl.environment.outputs import env_mode
from siirl.errors import ConfigError

AGENT = "actor_rollout_ref.rollout.agent."
RAW_CHAT = "data.return_raw_chat=true"
BUILTIN = """- name: single_turn_agent
  _target_: verl.experimental.agent_loop.single_turn_agent_loop.SingleTurnAgentLoop
- name: tool_agent
  _target_: verl.experimental.agent_loop.tool_agent_loop.ToolAgentLoop
"""
LOOP = """from siirl.agent_loop import AgentLoopBase, AgentLoopOutput, register


@register("decorated")
class MyLoop(AgentLoopBase):
    def __init__(self, *args, budget=1, **kwargs):
        super().__init__(*args, **kwargs)
        self.budget = budget

    async def run(self, sampling_params, **kwargs):
        return AgentLoopOutput(prompt_ids=[1], response_ids=[2], response_mask=[1])


class SyncLoop(AgentLoopBase):
    def run(self, sampling_params, **kwargs):
        return None
"""


@pytest.mark.parametrize(("loop", "mode"), [("single_turn_agent", None), ("tool_agent", "turns")])
def test_default_agent_loop_picks_the_rollout(loop, mode):
    assert env_mode(load_config([f"{AGENT}default_agent_loop={loop}"])) == mode


def test_the_original_siirl_spelling_agent_name_is_the_default_loop():
    cfg = load_config([f"{AGENT}agent_name=tool_agent"])
    assert cfg.actor_rollout_ref.rollout.agent.default_agent_loop == "tool_agent" and env_mode(cfg) == "turns"


def test_a_file_of_verls_builtin_loops_keeps_siirls_rollouts(tmp_path):
    path = tmp_path / "agent.yaml"
    path.write_text(BUILTIN)
    cfg = load_config([f"{AGENT}agent_loop_config_path={path}", f"{AGENT}default_agent_loop=tool_agent"])
    assert cfg.actor_rollout_ref.rollout.agent.agent_loop_config_path == str(path) and env_mode(cfg) == "turns"


@pytest.fixture
def user_modules(tmp_path, monkeypatch):
    (tmp_path / "graph_loop.py").write_text("import langgraph_stand_in_absent\nclass ReactAgentLoop:\n    pass\n")
    (tmp_path / "verl_loop.py").write_text("from verl.experimental.agent_loop import AgentLoopBase\n")
    (tmp_path / "recipe_loop.py").write_text("from recipe.langgraph_agent.react_agent_loop import ReactAgentLoop\n")
    (tmp_path / "broken_loop.py").write_text("raise RuntimeError('no sandbox token')\n")
    (tmp_path / "plain.py").write_text("class NotALoop:\n    pass\n")
    (tmp_path / "my_loop.py").write_text(LOOP)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    for name in ("graph_loop", "verl_loop", "recipe_loop", "broken_loop", "plain", "my_loop"):
        sys.modules.pop(name, None)
    from siirl.agent_loop import AGENT_LOOPS

    AGENT_LOOPS.forget({"my_loop"})


def test_a_listed_user_loop_runs_the_agent_loop_rollout_with_its_entry_keys(user_modules):
    path = user_modules / "agent.yaml"
    path.write_text(BUILTIN + "- name: mine\n  _target_: my_loop.MyLoop\n  budget: 3\n")
    cfg = load_config([f"{AGENT}agent_loop_config_path={path}", RAW_CHAT])
    assert env_mode(cfg) == "agents"
    loops = load_agent_loops(cfg.actor_rollout_ref.rollout.agent)
    assert loops["mine"].cls.__name__ == "MyLoop" and loops["mine"].kwargs == {"budget": 3}
    assert "single_turn_agent" in loops and "tool_agent" not in loops


def test_a_decorated_loop_in_an_external_lib_is_the_default(user_modules):
    cfg = load_config([f"{AGENT}default_agent_loop=decorated", "actor_rollout_ref.model.external_lib=my_loop", RAW_CHAT])
    assert env_mode(cfg) == "agents"
    assert load_agent_loops(cfg.actor_rollout_ref.rollout.agent)["decorated"].cls.__name__ == "MyLoop"


@pytest.mark.parametrize(
    ("target", "needle"),
    [
        ("graph_loop.ReactAgentLoop", "needs the langgraph_stand_in_absent package, which is not installed"),
        ("verl_loop.Loop", ("imports verl, which siiRL does not ship: change its import (`from "
                            "verl.experimental.agent_loop import ...` -> `from siirl.agent_loop import ...`)")),
        ("recipe_loop.Loop", "`from recipe.langgraph_agent import ...` -> `from siirl.agent_loop.langgraph import ...`"),
        ("broken_loop.Loop", "cannot be imported (RuntimeError: no sandbox token)"),
        ("plain.NotALoop", "does not subclass siirl.agent_loop.AgentLoopBase"),
        ("plain.Missing", "is not a class of module plain"),
        ("my_loop.SyncLoop", "must define `async def run(self, sampling_params, **kwargs)`"),
        ("NoModule", "is not a `package.module.Class` path"),
    ],
)
def test_a_bad_target_is_refused_in_one_line_naming_it(user_modules, target, needle):
    path = user_modules / "agent.yaml"
    path.write_text(f"- name: react\n  _target_: {target}\n")
    with pytest.raises(ConfigError) as raised:
        load_config([f"{AGENT}agent_loop_config_path={path}", f"{AGENT}default_agent_loop=react", RAW_CHAT])
    message = str(raised.value)
    assert f"agent loop 'react' ({target})" in message and needle in message and "\n" not in message


@pytest.mark.parametrize(
    ("overrides", "needle"),
    [
        ([f"{AGENT}default_agent_loop=nowhere", RAW_CHAT], "default_agent_loop=nowhere names no agent loop; registered: "),
        ([f"{AGENT}default_agent_loop=tool_agent", RAW_CHAT], "tool_agent runs the multi-turn tool rollout"),
        ([f"{AGENT}default_agent_loop=mine"], "needs data.return_raw_chat=true"),
    ],
)
def test_a_run_that_cannot_pick_its_loops_is_one_line(user_modules, overrides, needle):
    path = user_modules / "agent.yaml"
    path.write_text("- name: mine\n  _target_: my_loop.MyLoop\n")
    with pytest.raises(ConfigError, match=needle.replace("(", r"\(")):
        load_config([f"{AGENT}agent_loop_config_path={path}", *overrides])


def test_a_file_that_is_not_a_list_of_loops_is_one_line(tmp_path):
    path = tmp_path / "agent.yaml"
    path.write_text("name: react\n")
    with pytest.raises(ConfigError, match="must be a YAML list of loops, each with name and _target_"):
        load_config([f"{AGENT}agent_loop_config_path={path}"])


def rows_naming(tmp_path, names):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from siirl.embedded_assets import default_data_files

    names = [*names, *[None] * (32 - len(names))]  # one batch of the default size
    table = pq.read_table(default_data_files()[0]).slice(0, len(names))
    path = tmp_path / "rows.parquet"
    pq.write_table(table.append_column("agent_name", pa.array(names, pa.string())), path)
    return str(path)


@pytest.mark.parametrize(
    ("names", "listed", "needle"),
    [
        (["mine", "single_turn_agent", None], True, None),
        (["mine", "nope"], True, "row 1 names agent loop 'nope' in its agent_name column; this run's loops: "),
        (["tool_agent", "single_turn_agent"], False, None),
        (["single_turn_agent", "mine"], False, "row 1 names agent loop 'mine'"),
    ],
)
def test_each_rows_agent_name_is_checked_before_ray(user_modules, capsys, names, listed, needle):
    from siirl.main_dag import EXIT_USER_ERROR, main

    path = user_modules / "agent.yaml"
    path.write_text("- name: mine\n  _target_: my_loop.MyLoop\n")
    data = rows_naming(user_modules, names)
    loops = [f"{AGENT}agent_loop_config_path={path}"] if listed else []
    code = main(["--print-config", "device=cpu", RAW_CHAT, *loops, f"data.train_files={data}",
                 f"data.val_files={data}", f"trainer.output_dir={user_modules / 'out'}"])
    if needle is None:
        assert code == 0, capsys.readouterr().err
    else:
        err = capsys.readouterr().err
        assert code == EXIT_USER_ERROR and needle in err and len(err.strip().splitlines()) == 1, err


def test_an_edited_loop_file_is_read_again(tmp_path):
    import os

    from siirl.agent_loops import read_agent_loops

    path = tmp_path / "agent.yaml"
    path.write_text("- name: a\n  _target_: x.A\n")
    assert read_agent_loops(str(path)) == {"a": "x.A"}
    path.write_text("- name: b\n  _target_: x.Bee\n")
    os.utime(path, ns=(1, 1))  # a different modification time, whatever the clock's resolution
    assert read_agent_loops(str(path)) == {"b": "x.Bee"}
