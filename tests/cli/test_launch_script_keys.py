"""verl trainer/data/profiler keys the published launch scripts set: implemented, accepted at their no-op
value, or refused in one line."""

import json

import pytest
import torch
from tensordict import TensorDict

from siirl.config_checks import load_config
from siirl.dag_worker import val_generations
from siirl.engine.reward.batch_fields import set_list
from siirl.engine.workers.model_loading import load_tokenizer
from siirl.errors import ConfigError
from siirl.params.data import data_tokenizer_model


def test_no_op_values_load():
    cfg = load_config([
        "trainer.balance_batch=True", "trainer.del_local_ckpt_after_load=False",
        "trainer.use_legacy_worker_impl=disable", "data.filter_overlong_prompts_workers=64",
        "global_profiler.steps=null", "global_profiler.save_path=/tmp/p", "algorithm.use_pf_ppo=False",
        "profiler.enable=False", "profiler.level=level1", "profiler.ranks=[0]", "profiler.with_memory=True",
    ])
    assert cfg.trainer.use_legacy_worker_impl == "disable" and cfg.global_profiler.tool is None


@pytest.mark.parametrize(
    ("override", "named"),
    [
        ("trainer.del_local_ckpt_after_load=True", "keeps checkpoints"),
        ("global_profiler.tool=nsys", "global_profiler.tool='nsys' is not supported"),
        ("profiler.enable=True", "the original siiRL's profiler drives torch_npu's profiler"),
        ("trainer.use_legacy_worker_impl=sometimes", "expected one of auto, enable, disable"),
        ("trainer.log_val_generations=-1", ">= 0"),
        ("data.filter_overlong_prompts_workers=0", "> 0"),
    ],
)
def test_values_without_a_meaning_here_are_refused(override, named):
    with pytest.raises(ConfigError, match=named.replace("(", r"\(").replace(")", r"\)")) as info:
        load_config([override])
    assert "\n" not in str(info.value)


def test_megatron_keys_are_refused_as_megatron_before_unknown_keys():
    with pytest.raises(ConfigError, match="Megatron-LM training is not implemented"):
        load_config(["actor_rollout_ref.actor.megatron.tensor_model_parallel_size=2"])
    with pytest.raises(ConfigError, match="strategy='megatron' is not implemented"):
        load_config(["actor_rollout_ref.actor.no_such_key=1", "actor_rollout_ref.actor.strategy=megatron"])


def test_data_trust_remote_code_reaches_the_tokenizer():
    assert data_tokenizer_model(load_config([])).trust_remote_code is False
    assert data_tokenizer_model(load_config(["data.trust_remote_code=True"])).trust_remote_code is True


def test_val_generations_are_decoded_and_appended(tmp_path):
    cfg = load_config(["trainer.log_val_generations=1"])
    tokenizer = load_tokenizer(cfg.actor_rollout_ref.model)
    prompts = [tokenizer.encode("12+30="), tokenizer.encode("1+2=")]
    width = max(map(len, prompts))
    padded = torch.tensor([[tokenizer.pad_token_id] * (width - len(p)) + p for p in prompts])
    responses = torch.tensor([tokenizer.encode("42") + [0], tokenizer.encode("3") + [0, 0]][:1] * 2)
    batch = TensorDict({
        "prompts": padded,
        "attention_mask": torch.cat([padded.ne(tokenizer.pad_token_id).long(), torch.ones_like(responses)], 1),
        "responses": responses,
        "response_mask": responses.ne(0).long(),
    }, batch_size=[2])
    set_list(batch, "ground_truth", ["42", "3"])
    rows = val_generations.sample_rows(batch, torch.tensor([1.0, 0.0]), tokenizer, cfg.trainer.log_val_generations)
    assert rows == [{"input": "12+30=", "output": "42", "score": 1.0, "ground_truth": "42"}]
    val_generations.write_rows(tmp_path, 5, rows)
    val_generations.write_rows(tmp_path, 10, rows)
    lines = (tmp_path / val_generations.FILE_NAME).read_text().splitlines()
    assert [json.loads(line)["step"] for line in lines] == [5, 10]
