"""Tool calling: hermes parsing, the tool YAML, bounded calls, the built-in gsm8k and geo3k tools, ToolEnv episodes."""

import time
from pathlib import Path

import pytest
import yaml

from siirl.environment import VectorEnv
from siirl.environment.tools import (
    TOOL_PARSERS,
    ToolEnv,
    ToolTimeout,
    call_bounded,
    check_tool_classes,
    load_tool_config,
    parse_hermes,
    truncate,
)
from siirl.errors import ConfigError

FAKES = Path(__file__).resolve().parent.parent / "fakes"


@pytest.fixture(autouse=True)
def _fakes_importable(monkeypatch):
    monkeypatch.syspath_prepend(str(FAKES))


def schema(name, **properties):
    return {"type": "function", "function": {
        "name": name, "description": f"the {name} tool",
        "parameters": {"type": "object", "properties": {k: {"type": v} for k, v in properties.items()},
                       "required": list(properties)},
    }}


def write_tools(tmp_path, *entries):
    path = tmp_path / "tools.yaml"
    path.write_text(yaml.safe_dump({"tools": [
        {"class_name": cls, "config": config, "tool_schema": schema(name, **props)}
        for cls, name, config, props in entries
    ]}))
    return str(path)


def call(name, **arguments):
    import json

    return f'<tool_call>{json.dumps({"name": name, "arguments": arguments})}</tool_call>'


# ----- parsing -----

def test_hermes_reads_every_call_and_keeps_unreadable_ones_as_errors():
    text = ("let me check " + call("calc", answer="3") + '<tool_call>{"name": "b", "arguments": "{\\"x\\": 1}"}</tool_call>'
            "<tool_call>{not json}</tool_call><tool_call>[1]</tool_call><tool_call>{\"name\": \"c\"")
    calls = parse_hermes(text)
    assert [(c.name, c.arguments) for c in calls[:2]] == [("calc", {"answer": "3"}), ("b", {"x": 1})]
    assert "not valid JSON" in calls[2].error
    assert '"name"' in calls[3].error
    assert "no closing </tool_call>" in calls[4].error
    assert parse_hermes("the answer is 42") == []
    assert TOOL_PARSERS.get("hermes") is parse_hermes


def test_truncation_keeps_the_side_asked_for():
    text = "abcdefghij"
    assert truncate(text, 20, "middle") == text
    assert truncate(text, 4, "left") == "abcd...(truncated)"
    assert truncate(text, 4, "right") == "(truncated)...ghij"
    assert truncate(text, 4, "middle") == "ab...(truncated)...ij"


# ----- the tool YAML -----

def test_verl_gsm8k_yaml_loads_and_maps_to_the_builtin_tool(tmp_path):
    path = write_tools(tmp_path, ("verl.tools.gsm8k_tool.Gsm8kTool", "calc_gsm8k_reward", {"type": "native"},
                                  {"answer": "string"}))
    specs = load_tool_config(path)
    assert [s.name for s in specs] == ["calc_gsm8k_reward"]
    check_tool_classes(specs, path)


@pytest.mark.parametrize(("text", "needle"), [
    ("tools: [", "invalid YAML"),
    ("other: 1", "non-empty list under 'tools'"),
    ("tools: [{tool_schema: {type: function, function: {name: a}}}]", "needs a class_name"),
    ("tools: [{class_name: gsm8k, tool_schema: {type: function, function: {description: x}}}]", "non-empty name"),
    (("tools: [{class_name: gsm8k, tool_schema: {type: function, function: {name: a, parameters: "
     "{type: object, properties: {}, required: [x]}}}}]"), "'x', which is not in properties"),
    (("tools: [{class_name: gsm8k, tool_schema: {type: function, function: {name: a}}},"
     " {class_name: gsm8k, tool_schema: {type: function, function: {name: a}}}]"), "a second tool named 'a'"),
])
def test_malformed_tool_yaml_is_one_line(tmp_path, text, needle):
    path = tmp_path / "tools.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_tool_config(str(path))
    assert needle in str(info.value) and "\n" not in str(info.value)


def test_missing_file_and_bad_class_paths_are_one_line(tmp_path):
    with pytest.raises(ConfigError, match="file not found"):
        load_tool_config(str(tmp_path / "absent.yaml"))
    for class_name, needle in [("no_such_pkg.tools.Tool", "no_such_pkg"), ("faulty_tools:Missing", "Missing"),
                               ("nameless", "unknown tool 'nameless'"), ("faulty_tools:TOOL_CHAT_TEMPLATE", "not a")]:
        path = write_tools(tmp_path, (class_name, "t", {}, {}))
        with pytest.raises(ConfigError) as info:
            check_tool_classes(load_tool_config(path), path)
        assert needle in str(info.value) and "tool 't'" in str(info.value), info.value


# ----- bounded calls -----

def test_bounded_call_returns_raises_and_times_out():
    assert call_bounded(lambda x: x + 1, 1.0, 1) == 2

    async def coroutine():
        return "async"

    assert call_bounded(coroutine, 1.0) == "async"
    with pytest.raises(ValueError, match="boom"):
        call_bounded(lambda: (_ for _ in ()).throw(ValueError("boom")), 1.0)
    start = time.monotonic()
    with pytest.raises(ToolTimeout):
        call_bounded(time.sleep, 0.3, 30)
    assert time.monotonic() - start < 2.0


# ----- episodes -----

@pytest.fixture
def tools_yaml(tmp_path):
    return write_tools(
        tmp_path,
        ("faulty_tools:EchoTool", "echo", {}, {"text": "string"}),
        ("faulty_tools:HangingTool", "hang", {}, {}),
        ("faulty_tools:BlockingTool", "block", {}, {}),
        ("faulty_tools:RaisingTool", "fail", {}, {}),
        ("gsm8k", "calc_gsm8k_reward", {}, {"answer": "string"}),
    )


def test_a_call_runs_its_tool_and_answers_as_a_tool_message(tools_yaml):
    env = ToolEnv(tools_yaml, max_parallel_calls=2, tool_timeout_s=2.0)
    env.reset({"tools_kwargs": {"echo": {"create_kwargs": {}}}})
    result = env.step("thinking " + call("echo", text="hi", reward=0.5) + call("echo", text="yo", reward=0.25)
                      + call("echo", text="dropped"))
    assert not result.done and result.reward == 0.75
    assert result.observation == [{"role": "tool", "content": "echo hi"}, {"role": "tool", "content": "echo yo"}]
    assert result.info["tool_calls"] == 2 and result.info["rollout_reward_scores"] == {"echo": 2.0}
    final = env.step("42")  # no call: the episode ends, the tools' final rewards are reported
    assert final.done and final.reward == 0.0 and final.info["rollout_reward_scores"] == {"echo": 2.0}


@pytest.mark.parametrize(("action", "needle", "counter"), [
    (call("nope"), "unknown tool 'nope'; available: echo, hang", "tool_errors"),
    ("<tool_call>{oops</tool_call>", "not valid JSON", "tool_errors"),
    (call("fail"), "RuntimeError: the sandbox is down", "tool_errors"),
])
def test_a_failing_call_ends_its_turn_with_the_error_and_is_counted(tools_yaml, action, needle, counter):
    env = ToolEnv(tools_yaml, tool_timeout_s=0.5)
    env.reset({})
    result = env.step(action)
    assert not result.done and result.reward == 0.0
    [message] = result.observation
    assert message["role"] == "tool" and needle in message["content"], message
    assert result.info[counter] == 1 and result.info["tool_calls"] == 1
    after = env.step(call("echo", text="still here"))  # the environment keeps serving
    assert after.observation[0]["content"] == "echo still here"


@pytest.mark.parametrize("name", ["hang", "block"])
def test_a_timed_out_call_ends_the_episode_scored_0_and_skips_the_steps_other_calls(tools_yaml, name):
    env = ToolEnv(tools_yaml, max_parallel_calls=2, tool_timeout_s=0.5)
    env.reset({"tools_kwargs": {"echo": {"create_kwargs": {}}}})
    start = time.monotonic()
    result = env.step(call(name) + call(name))  # both at once: one timeout, not two
    assert time.monotonic() - start < 1.5
    assert result.done and result.reward == 0.0 and result.info["error"] == f"tool {name!r} timed out after 0.5s"
    assert result.info["tool_timeouts"] == 2 and result.info["rollout_reward_scores"] == {}  # no calc_reward made
    [(callable_name, stats)] = [(k, v) for k, v in result.info["callbacks"].items() if name in k]
    assert callable_name.endswith("Tool.execute)") and stats[:2] == [2, 2] and "timed out" in stats[2]


def test_gsm8k_tool_scores_submissions_like_verls(tools_yaml):
    env = ToolEnv(tools_yaml, max_user_turns=2)
    env.reset({"tools_kwargs": {"calc_gsm8k_reward": {"create_kwargs": {"ground_truth": "72"}}}})
    wrong = env.step(call("calc_gsm8k_reward", answer="70"))
    assert wrong.reward == -0.05 and wrong.info["rollout_reward_scores"] == {"calc_gsm8k_reward": 0.0}
    assert "reward=0.0" in wrong.observation[0]["content"]
    right = env.step(call("calc_gsm8k_reward", answer="72"))
    assert right.reward == 0.0 and right.info["rollout_reward_scores"] == {"calc_gsm8k_reward": 1.0}
    capped = env.step(call("calc_gsm8k_reward", answer="72"))  # max_user_turns=2 reached: no third tool turn
    assert capped.done and capped.info["rollout_reward_scores"] == {"calc_gsm8k_reward": 1.0}


def test_verls_geo3k_tool_scores_the_bare_answer_with_siirls_geo3k_scorer(tmp_path):
    path = write_tools(tmp_path, ("verl.tools.geo3k_tool.Geo3kTool", "calc_geo3k_reward", {"type": "native"},
                                  {"answer": "string"}))
    env = ToolEnv(path)
    env.reset({"tools_kwargs": {"calc_geo3k_reward": {"create_kwargs": {"ground_truth": "2\\sqrt{3}"}}}})
    wrong = env.step(call("calc_geo3k_reward", answer="3"))
    assert wrong.reward == -0.05 and wrong.info["rollout_reward_scores"] == {"calc_geo3k_reward": 0.0}
    right = env.step(call("calc_geo3k_reward", answer="2 \\sqrt{3}"))  # unboxed, no format bonus: exactly 1.0
    assert right.reward == 0.0 and right.info["rollout_reward_scores"] == {"calc_geo3k_reward": 1.0}
    again = env.step(call("calc_geo3k_reward", answer="2\\sqrt{3}"))  # no improvement: the penalty
    assert again.reward == -0.05 and again.info["rollout_reward_scores"] == {"calc_geo3k_reward": 1.0}


def test_the_step_bound_kills_a_tool_that_outlives_its_own_timeout(tools_yaml):
    kwargs = {"tool_config_path": tools_yaml, "tool_timeout_s": 60.0}
    # The bound covers the workers' reset too: 5 s leaves room for a busy host to start them.
    with VectorEnv("tools", 2, kwargs, num_workers=2, timeout_s=5.0) as venv:
        venv.reset([{}, {}], [0, 1])
        start = time.monotonic()
        hung, fine = venv.step({0: call("block"), 1: call("echo", text="ok")})
        assert time.monotonic() - start < 20.0
        assert hung.done and "timed out" in hung.info["error"]
        assert fine.observation == [{"role": "tool", "content": "echo ok"}]
