"""verl's ``actor_rollout_ref.model.custom_chat_template``: it replaces the tokenizer's chat template in every
chat the run renders (dataloader prompts, tool prompts, observations, the driver's checks); a template that
does not compile is one line before Ray."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
import yaml
from tensordict import TensorDict

from siirl.agent_loop.observation import ObservationRenderer
from siirl.data_coordinator.prompt_encoding import PromptEncoder
from siirl.data_coordinator.tensordict_ops import set_non_tensor_list
from siirl.embedded_assets import default_model_path
from siirl.engine.rollout.tool_prompts import render_tool_prompts
from siirl.engine.workers.model_loading import load_tokenizer
from siirl.main_dag import EXIT_USER_ERROR, main
from siirl.params.data import data_tokenizer_model
from siirl.params.model import PolicyModelConfig
from tests.e2e.gsm8k_tool_yaml import GSM8K_TOOL_YAML

FAKES = Path(__file__).resolve().parent.parent / "fakes"
MARKED = (
    "{% if tools %}<tools>{% for t in tools %}{{ t['function']['name'] }}{% endfor %}</tools>{% endif %}"
    "{% for m in messages %}<<{{ m['role'] }}:{{ m['content'] }}>>{% endfor %}"
    "{% if add_generation_prompt %}<<assistant:{% endif %}"
)


@pytest.fixture(scope="module")
def tokenizers():
    stock = load_tokenizer(PolicyModelConfig(path=default_model_path()))
    custom = load_tokenizer(PolicyModelConfig(path=default_model_path(), custom_chat_template=MARKED))
    return stock, custom


def test_dataloader_prompt_ids_are_rendered_with_the_custom_template(tokenizers):
    stock, custom = tokenizers
    chat = [[{"role": "user", "content": "12+30="}]]
    ids = {name: PromptEncoder(tok, 32, "error", True).encode(chat, str)["input_ids"][0]
           for name, tok in (("stock", stock), ("custom", custom))}
    assert not torch.equal(ids["stock"], ids["custom"])
    rendered = custom.decode(ids["custom"][ids["custom"] != custom.pad_token_id])
    assert rendered == "<<user:12+30=>><<assistant:"


def test_tool_prompts_and_observations_use_the_custom_template(tokenizers):
    custom = tokenizers[1]
    chats = [[{"role": "user", "content": "5+7="}]]
    rows = TensorDict(PromptEncoder(custom, 48, "error", True).encode(chats, str), [1])
    set_non_tensor_list(rows, "raw_prompt", chats)
    render_tool_prompts(rows, custom, [{"type": "function", "function": {"name": "calc"}}], custom.pad_token_id)
    prompt = custom.decode(rows["input_ids"][0][rows["attention_mask"][0].bool()])
    assert prompt == "<tools>calc</tools><<user:5+7=>><<assistant:"
    observation = ObservationRenderer(custom)([{"role": "tool", "content": "12"}])
    assert custom.decode(observation) == "<<tool:12>><<assistant:"


def test_the_data_side_tokenizer_keeps_the_template():
    """``data.trust_remote_code`` copies the model section for the data side: the template goes along."""
    model = PolicyModelConfig(path=default_model_path(), custom_chat_template=MARKED)
    cfg = SimpleNamespace(data=SimpleNamespace(trust_remote_code=True), actor_rollout_ref=SimpleNamespace(model=model))
    assert data_tokenizer_model(cfg).custom_chat_template == MARKED


def _run(tmp_path, template):
    (tmp_path / "tools.yaml").write_text(GSM8K_TOOL_YAML)
    (tmp_path / "run.yaml").write_text(yaml.safe_dump({"actor_rollout_ref": {"model": {"custom_chat_template": template}}}))
    return main(["--print-config", f"--config-path={tmp_path}", "--config-name=run", "device=cpu",
                 "actor_rollout_ref.rollout.multi_turn.enable=true", "data.return_raw_chat=true",
                 "data.max_prompt_length=64",  # the embedded default (16) cannot hold the tool schemas' prompt
                 f"actor_rollout_ref.rollout.multi_turn.tool_config_path={tmp_path / 'tools.yaml'}"])


def test_the_drivers_checks_render_with_the_custom_template(tmp_path, capsys, monkeypatch):
    """The embedded model's own template has no tool role (refused for a tool run); a custom one with it plans."""
    monkeypatch.syspath_prepend(str(FAKES))
    from faulty_tools import TOOL_CHAT_TEMPLATE

    assert _run(tmp_path, TOOL_CHAT_TEMPLATE) == 0, capsys.readouterr().err
    assert _run(tmp_path, None) == EXIT_USER_ERROR
    assert "cannot render a 'tool' message" in capsys.readouterr().err


@pytest.mark.parametrize(("template", "needle"), [
    ("{% for m in messages %}{{ m['content'] }", "is not a valid Jinja template (line 1: unexpected '}')"),
    ("{% if add_generation_prompt %}", "is not a valid Jinja template"),
    ("  ", "must be a Jinja chat template string"),
])
def test_a_template_that_does_not_compile_is_one_line_before_ray(tmp_path, capsys, template, needle):
    assert _run(tmp_path, template) == EXIT_USER_ERROR
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and needle in err and "custom_chat_template" in err
