"""verl's tool-calling keys: accepted as their scripts write them, one line and exit 2 when wrong."""

import pytest
from launch_scripts import tool_template_model

from siirl.main_dag import EXIT_USER_ERROR, main
from tests.e2e.gsm8k_tool_yaml import GSM8K_TOOL_YAML


@pytest.fixture
def tool_yaml(tmp_path):
    path = tmp_path / "gsm8k_tool_config.yaml"
    path.write_text(GSM8K_TOOL_YAML)
    return path


def tool_run(path, *extra):
    return ["--print-config", "device=cpu", "actor_rollout_ref.rollout.multi_turn.enable=true",
            f"actor_rollout_ref.rollout.multi_turn.tool_config_path={path}", "data.return_raw_chat=true", *extra]


def test_verls_multi_turn_keys_are_accepted(capsys, tool_yaml, tmp_path):
    model = tool_template_model(tmp_path)
    code = main(tool_run(
        tool_yaml, f"actor_rollout_ref.model.path={model}", "actor_rollout_ref.rollout.multi_turn.max_assistant_turns=5",
        "actor_rollout_ref.rollout.multi_turn.max_user_turns=4", "actor_rollout_ref.rollout.multi_turn.format=hermes",
        "actor_rollout_ref.rollout.multi_turn.max_parallel_calls=2",
        "actor_rollout_ref.rollout.multi_turn.max_tool_response_length=128",
        "actor_rollout_ref.rollout.multi_turn.tool_response_truncate_side=left",
        "actor_rollout_ref.rollout.multi_turn.use_inference_chat_template=false",
        "actor_rollout_ref.rollout.multi_turn.tokenization_sanity_check_mode=ignore_strippable",
        "data.max_prompt_length=64",  # the embedded prompts' 16 tokens do not hold the tool schemas
    ))
    out = capsys.readouterr()
    assert code == 0, out.err
    assert "max_turns: 5" in out.out and "max_parallel_calls: 2" in out.out


@pytest.mark.parametrize(("extra", "needle"), [
    (["data.return_raw_chat=false"], "needs data.return_raw_chat=true"),
    (["actor_rollout_ref.rollout.multi_turn.format=nope"], "unknown tool-call format 'nope'"),
    (["actor_rollout_ref.rollout.multi_turn.tool_response_truncate_side=top"], "tool_response_truncate_side"),
    (["actor_rollout_ref.rollout.multi_turn.max_assistant_turns=0"], "max_assistant_turns=0"),
    (["actor_rollout_ref.rollout.multi_turn.interaction_config_path=i.yaml"], "i.yaml: file not found"),
    (["actor_rollout_ref.rollout.multi_turn.use_inference_chat_template=true"], "use_inference_chat_template"),
    (["actor_rollout_ref.rollout.multi_turn.tokenization_sanity_check_mode=loose"], "tokenization_sanity_check_mode"),
    ([], "cannot render a 'tool' message"),  # the embedded template has no tool role
])
def test_bad_tool_config_is_one_line(capsys, tool_yaml, extra, needle):
    code = main(tool_run(tool_yaml, *extra))
    err = capsys.readouterr().err.strip()
    assert code == EXIT_USER_ERROR and "\n" not in err and "Traceback" not in err, err
    assert needle in err, err


@pytest.mark.parametrize(("text", "needle"), [
    (None, "file not found"),
    ("tools: [{class_name: x", "invalid YAML"),
    (GSM8K_TOOL_YAML.replace("verl.tools.gsm8k_tool.Gsm8kTool", "my_missing_pkg.tools.Calc"), "my_missing_pkg"),
])
def test_bad_tool_yaml_is_one_line_before_ray(capsys, tmp_path, text, needle):
    path = tmp_path / "tools.yaml"
    if text is not None:
        path.write_text(text)
    code = main(tool_run(path))
    err = capsys.readouterr().err.strip()
    assert code == EXIT_USER_ERROR and "\n" not in err and needle in err, err
