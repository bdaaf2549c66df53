"""Config composition: defaults, overrides, device group, and one-line errors for bad keys/values."""

import pickle

import pytest

from siirl.config_checks import load_config
from siirl.errors import ConfigError
from siirl.params import SiirlConfig


def test_defaults_compose():
    cfg = load_config([])
    assert cfg.algorithm.adv_estimator == "grpo"
    assert cfg.algorithm.workflow_type == "DEFAULT"
    assert cfg.trainer.device == "auto"
    assert cfg.dag.custom_pipeline_fn == ""
    assert cfg.dag.agent_placement == "auto"
    assert cfg.trainer.output_dir == "outputs/siirl/grpo_tiny"
    assert cfg.actor_rollout_ref.rollout.name == "hf"


def test_overrides_and_device_group():
    cfg = load_config(["device=npu", "algorithm.adv_estimator=gspo", "critic.enable=true"])
    assert cfg.trainer.device == "npu"
    assert cfg.trainer.n_devices_per_node == 8
    assert cfg.algorithm.adv_estimator == "gspo"
    assert cfg.critic.enable is True


@pytest.mark.parametrize(
    ("override", "expected"),
    [
        ("trainer.bogus=1", "trainer.bogus"),
        ("foo.bar=1", "foo"),
        ("+foo=1", "foo"),
        ("+trainer.bogus=2", "bogus"),
        ("trainer.nnodes=abc", "trainer.nnodes"),
        ("actor_rollout_ref.rollout.n=0", "actor_rollout_ref.rollout.n"),
        ("algorithm.adv_estimator=magic", "registered: cpgd, gae"),
        ("data.truncation=middle", "data.truncation"),
        ("device=tpu", "valid devices: auto, cpu, cuda, npu"),
        ("reward_model.strategy=megatron", "reward_model.strategy='megatron' is not implemented"),
        ("reward_model.micro_batch_size_per_gpu=0", "reward_model.micro_batch_size_per_gpu"),
        ("actor_rollout_ref.rollout.temperature=0", "greedy validation is actor_rollout_ref.rollout.val_kwargs"),
        ("actor_rollout_ref.rollout.temperature=inf", "rollout.temperature=inf is invalid; expected finite and > 0"),
        ("actor_rollout_ref.rollout.val_kwargs.temperature=nan", "val_kwargs.temperature=nan is invalid"),
        ("actor_rollout_ref.rollout.top_k=-5", "top_k=-5 is invalid; expected >= -1"),
        ("actor_rollout_ref.actor.optim.lr=inf", "optim.lr=inf is invalid; expected finite and >= 0"),
        ("critic.optim.lr=-1e-3", "critic.optim.lr=-0.001 is invalid"),
        ("reward_model.timeout_s=0", "reward_model.timeout_s=0.0 is invalid; expected finite and > 0"),
        ("reward_model.timeout_s=inf", "reward_model.timeout_s=inf is invalid"),
        ("reward_model.num_workers=0", "reward_model.num_workers=0 is invalid; expected > 0"),
        ("trainer.stall_timeout_s=-5", "expected null (follow the step times) or >= 0"),
        (
            "dag.agent_placement=apart",
            "dag.agent_placement='apart' is invalid; expected one of auto, own, shared",
        ),
    ],
)
def test_bad_config_is_one_line_naming_the_key(override, expected):
    with pytest.raises(ConfigError) as err:
        load_config([override])
    message = str(err.value)
    assert expected in message
    assert "\n" not in message


def test_config_is_the_typed_tree_and_pickles():
    cfg = load_config(["algorithm.adv_estimator=gae", "+env.kwargs.steps=3"])
    assert isinstance(cfg, SiirlConfig)
    assert cfg.env.kwargs == {"steps": 3} and type(cfg.env.kwargs) is dict  # no OmegaConf containers
    assert type(cfg.data.train_files) is list
    assert pickle.loads(pickle.dumps(cfg)) == cfg


def test_reward_model_keys_as_verl_names_them():
    cfg = load_config(
        [
            "reward_model.model.path=/models/rm",
            "reward_model.model.input_tokenizer=/models/policy",
            "reward_model.model.trust_remote_code=true",
            "reward_model.strategy=fsdp",
            "reward_model.micro_batch_size_per_gpu=8",
            "reward_model.use_dynamic_bsz=false",
            "reward_model.forward_max_token_len_per_gpu=16384",
            "reward_model.max_length=2048",
        ]
    )
    rm = cfg.reward_model
    assert (rm.model.path, rm.model.input_tokenizer, rm.strategy, rm.max_length) == (
        "/models/rm",
        "/models/policy",
        "fsdp",
        2048,
    )
    assert load_config([]).reward_model.max_length is None
    assert (
        load_config([]).reward_model.model.path == ""
    )  # never filled with the policy: an LM is no reward model
