"""verl's ``checkpoint.save_contents=[..., 'hf_model']``: the checkpoint's actor folder also holds the trained
model as a Hugging Face folder that ``from_pretrained`` loads with the trained weights (and its tokenizer)."""

from __future__ import annotations

import torch
from engine_testutils import actor_config, make_batch, model_config
from transformers import AutoModelForCausalLM, AutoTokenizer

from siirl.engine.workers.actor import ActorWorker
from siirl.engine.workers.hf_export import HF_MODEL_DIR
from siirl.params.checkpoint_contents import CheckpointContentsConfig

ROWS = 8


def _trained(tiny_model_dir, save_contents: list[str]) -> ActorWorker:
    cfg = actor_config(
        strategy="fsdp", ppo_mini_batch_size=ROWS, checkpoint=CheckpointContentsConfig(save_contents=save_contents)
    )
    actor = ActorWorker(model_config(tiny_model_dir), cfg, "cpu")
    actor.update_policy(make_batch(ROWS, seed=1))
    return actor


def test_hf_model_round_trips_through_from_pretrained(tiny_model_dir, single_process_group, tmp_path):
    actor = _trained(tiny_model_dir, ["hf_model"])
    trained = {name: tensor.clone() for name, tensor in actor.named_parameters_for_sync()}
    actor.save_checkpoint(tmp_path / "actor")
    folder = tmp_path / "actor" / HF_MODEL_DIR
    loaded = AutoModelForCausalLM.from_pretrained(folder, torch_dtype=torch.float32)
    assert AutoTokenizer.from_pretrained(folder).pad_token == "<pad>"
    state = dict(loaded.named_parameters())
    assert set(trained) <= set(state)
    for name, tensor in trained.items():
        torch.testing.assert_close(state[name], tensor, rtol=0, atol=0, msg=name)
    original = AutoModelForCausalLM.from_pretrained(tiny_model_dir, torch_dtype=torch.float32)
    assert any(not torch.equal(p, dict(original.named_parameters())[n]) for n, p in trained.items())
    assert list((tmp_path / "actor").glob("rank_*_of_*.safetensors"))  # the resume files are still written


def test_no_hf_folder_by_default(tiny_model_dir, single_process_group, tmp_path):
    _trained(tiny_model_dir, ["model", "optimizer", "extra"]).save_checkpoint(tmp_path / "actor")
    assert not (tmp_path / "actor" / HF_MODEL_DIR).exists()
