"""Interactions (verl's simulated user): the YAML, the built-in gsm8k user, and ToolEnv episodes where the
user answers the policy's tool-free turns, bounded like tool calls."""

from pathlib import Path

import pytest
import yaml

from siirl.environment.interactions import (
    build_interactions,
    check_interaction_classes,
    load_interaction_config,
)
from siirl.environment.interactions.gsm8k import CORRECT, RETRY, Gsm8kInteraction
from siirl.environment.tools import ToolEnv
from siirl.errors import ConfigError

FAKES = Path(__file__).resolve().parent.parent / "fakes"


@pytest.fixture(autouse=True)
def _fakes_importable(monkeypatch):
    monkeypatch.syspath_prepend(str(FAKES))


def write_yaml(tmp_path, entries, name="interactions.yaml"):
    path = tmp_path / name
    path.write_text(yaml.safe_dump({"interaction": entries}))
    return str(path)


def test_verl_and_siirl_yaml_map_to_the_builtin_gsm8k_user_and_names_default_from_the_class(tmp_path):
    path = write_yaml(tmp_path, [
        {"name": "gsm8k", "class_name": "verl.interactions.gsm8k_interaction.Gsm8kInteraction", "config": {}},
        {"name": "siirl_gsm8k",
         "class_name": "siirl.execution.rollout_flow.multiturn.interactions.gsm8k_interaction.Gsm8kInteraction"},
        {"class_name": "faulty_interactions:CountingInteraction", "config": {"rounds": 3}},
    ])
    specs = load_interaction_config(path)
    assert [s.name for s in specs] == ["gsm8k", "siirl_gsm8k", "counting"]
    check_interaction_classes(specs, path)
    built = build_interactions(specs)
    assert type(built["gsm8k"]) is type(built["siirl_gsm8k"]) is Gsm8kInteraction
    assert built["counting"].config == {"rounds": 3, "name": "counting"}


def test_names_default_to_the_class_name_without_interaction():
    from siirl.environment.interactions.config import default_name

    assert default_name("verl.interactions.gsm8k_interaction.Gsm8kInteraction") == "gsm8k"
    assert default_name("my_pkg:WeatherUser") == "weatheruser"


@pytest.mark.parametrize(("text", "needle"), [
    ("interaction: [{class_name: x", "invalid YAML"),
    ("tools: []", "non-empty list under 'interaction'"),
    ("interaction: [{config: {}}]", "interaction[0] needs a class_name"),
    ("interaction: [{class_name: a.B, config: [1]}]", "config must be a mapping"),
    ("interaction: [{class_name: a.GsmInteraction}, {name: gsm, class_name: b.C}]", "a second interaction named 'gsm'"),
])
def test_malformed_interaction_yaml_is_one_line(tmp_path, text, needle):
    path = tmp_path / "i.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_interaction_config(str(path))
    assert needle in str(info.value)
    assert "\n" not in str(info.value)


def test_missing_file_and_unimportable_class_are_one_line(tmp_path):
    with pytest.raises(ConfigError, match="file not found"):
        load_interaction_config(str(tmp_path / "none.yaml"))
    path = write_yaml(tmp_path, [{"name": "u", "class_name": "my_missing_pkg.users.User"}])
    with pytest.raises(ConfigError, match="interaction 'u'.*my_missing_pkg") as info:
        check_interaction_classes(load_interaction_config(path), path)
    assert "\n" not in str(info.value)


def test_gsm8k_user_scores_the_last_answer_like_the_gsm8k_tool(tmp_path):
    user = build_interactions(load_interaction_config(write_yaml(tmp_path, [{"class_name": "gsm8k"}])))["gsm8k"]
    assert isinstance(user, Gsm8kInteraction) and user.name == "gsm8k"
    instance = user.start_interaction("a", ground_truth="42", query="6*7?", name="gsm8k")
    chat = [{"role": "user", "content": "6*7?"}, {"role": "assistant", "content": "#### 41"}]
    assert user.generate_response(instance, chat) == (False, RETRY, 0.0, {})
    chat += [{"role": "user", "content": RETRY}, {"role": "assistant", "content": "42 or 43"}]
    assert user.generate_response(instance, chat)[2] == 0.0  # the last number counts
    chat[-1]["content"] = "6*7 = 42"
    assert user.generate_response(instance, chat) == (True, CORRECT, 1.0, {})
    user.finalize_interaction(instance)
    assert instance not in user._instances


# ----- episodes -----

def env_with(tmp_path, cls, timeout_s=5.0, tools=None, **kwargs):
    path = write_yaml(tmp_path, [{"name": "user", "class_name": cls, "config": {"rounds": 2}}])
    return ToolEnv(tool_config_path=tools, interaction_config_path=path, tool_timeout_s=timeout_s, **kwargs)


def task(**extra):
    return {"raw_prompt": [{"role": "user", "content": "2+2?"}], "interaction_kwargs": {"name": "user", **extra}}


def test_the_user_answers_tool_free_turns_until_it_ends_the_episode(tmp_path):
    env = env_with(tmp_path, "faulty_interactions:CountingInteraction")
    env.reset(task())
    first = env.step("four")
    assert not first.done and first.observation == [{"role": "user", "content": "round 1 of four"}]
    assert first.reward == pytest.approx(0.1) and first.info["interaction_turns"] == 1
    last = env.step("4")
    assert last.done and last.reward == pytest.approx(0.2)
    assert last.info["rollout_reward_scores"] == {"user_turn_rewards": pytest.approx([0.1, 0.2])}
    assert env._messages[-2:] == [{"role": "assistant", "content": "4"}, {"role": "user", "content": "round 2 of 4"}]
    assert env.interaction.interactions["user"].seen == {}  # finalized


def test_max_user_turns_bounds_interaction_turns(tmp_path):
    env = env_with(tmp_path, "faulty_interactions:CountingInteraction", max_user_turns=1)
    env.reset(task())
    assert not env.step("four").done
    end = env.step("4")
    assert end.done and end.reward == 0.0 and end.info["interaction_turns"] == 1


@pytest.mark.parametrize(("cls", "counter"), [
    ("faulty_interactions:RaisingInteraction", "interaction_errors"),
    ("faulty_interactions:HangingInteraction", "interaction_timeouts"),
])
def test_a_failing_user_ends_the_turn_and_is_counted(tmp_path, cls, counter):
    env = env_with(tmp_path, cls, timeout_s=0.3)
    env.reset(task())
    result = env.step("four")
    assert result.done and result.reward == 0.0
    assert result.info[counter] == 1 and result.info["rollout_reward_scores"]["user_turn_rewards"] == []
    assert ("error" in result.info) == (counter == "interaction_timeouts")  # a timeout scores the trajectory 0


def test_tool_calls_still_go_to_the_tools_and_the_user_gets_the_rest(tmp_path):
    tools = tmp_path / "tools.yaml"
    tools.write_text(yaml.safe_dump({"tools": [
        {"class_name": "faulty_tools:EchoTool", "tool_schema": {"type": "function", "function": {"name": "echo"}}}
    ]}))
    env = env_with(tmp_path, "faulty_interactions:CountingInteraction", tools=str(tools))
    env.reset(task())
    tool_turn = env.step('<tool_call>{"name": "echo", "arguments": {"text": "hi"}}</tool_call>')
    assert tool_turn.observation == [{"role": "tool", "content": "echo hi"}]
    user_turn = env.step("four")
    assert user_turn.observation[0]["role"] == "user" and user_turn.info["interaction_turns"] == 1
    assert [m["role"] for m in env._messages] == ["user", "assistant", "tool", "assistant", "user"]


def test_a_row_without_a_known_interaction_name_is_refused(tmp_path):
    env = env_with(tmp_path, "faulty_interactions:CountingInteraction")
    with pytest.raises(ValueError, match="names interaction 'nope'"):
        env.reset({"interaction_kwargs": {"name": "nope"}})
