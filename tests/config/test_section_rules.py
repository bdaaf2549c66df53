"""Each config section checks its own values (``siirl.params.rules``): a rule is declared once, on its field,
and a section that sits at several paths names the path of the value it refuses."""

import dataclasses

import pytest

from siirl.errors import ConfigError
from siirl.params import SiirlConfig, compose_config
from siirl.params.rules import field_table, section_fields, validate_sections
from siirl.params.schema_keys import schema_keys
from siirl.params.validate import UNSUPPORTED


def _sections(cls: type, seen: set[type]) -> set[type]:
    seen.add(cls)
    for _, section in section_fields(cls):
        if section is not None and section not in seen:
            _sections(section, seen)
    return seen


def test_every_rule_sits_on_a_schema_key_and_most_sections_own_rules():
    leaves = schema_keys(SiirlConfig).leaves
    assert set(field_table(SiirlConfig, "rule")) <= leaves and set(UNSUPPORTED) <= leaves
    own = [
        cls for cls in _sections(SiirlConfig, set())
        if "validate" in vars(cls) or any(f.metadata for f in dataclasses.fields(cls) if f.name in cls.__annotations__)
    ]
    assert len(own) >= 20, sorted(cls.__name__ for cls in own)


@pytest.mark.parametrize(
    ("override", "message"),
    [
        (
            "critic.model.remove_padding_layout=rows",
            "bad config: critic.model.remove_padding_layout='rows' is invalid; expected one of auto, packed, "
            + "shared, trimmed",
        ),
        (
            "reward_model.model.fused_kernel_options.impl_backend=cuda",
            "bad config: reward_model.model.fused_kernel_options.impl_backend='cuda' is invalid; expected one of "
            + "torch, triton (or null)",
        ),
        (
            "reward_model.model.fsdp_config.grad_offload=true",
            "bad config: reward_model.model.fsdp_config.grad_offload=True was removed from verl",
        ),
        ("critic.ppo_epochs=0", "bad config: critic.ppo_epochs=0 is invalid; expected > 0"),
        ("data.max_response_length=0", "bad config: data.max_response_length=0 is invalid; expected > 0"),
        (
            "actor_rollout_ref.rollout.micro_batch_size=0",
            "bad config: actor_rollout_ref.rollout.micro_batch_size=0 is invalid; expected > 0",
        ),
        (
            "actor_rollout_ref.rollout.weight_sync_bucket_mb=0",
            "bad config: actor_rollout_ref.rollout.weight_sync_bucket_mb=0 is invalid; expected > 0",
        ),
        ("critic.cliprange_value=-0.5", "bad config: critic.cliprange_value=-0.5 is invalid; expected >= 0"),
        (
            "algorithm.workflow_type=ASYNC",
            "bad config: algorithm.workflow_type='ASYNC' is invalid; expected one of DEFAULT, DAPO, EMBODIED",
        ),
        (
            "actor_rollout_ref.actor.optim.min_lr_ratio=1.5",
            "bad config: actor_rollout_ref.actor.optim.min_lr_ratio=1.5 is invalid; expected in [0, 1]",
        ),
        ("critic.optim.min_lr_ratio=-1", "bad config: critic.optim.min_lr_ratio=-1.0 is invalid; expected in [0, 1]"),
        (
            "actor_rollout_ref.actor.optim.lr_warmup_steps_ratio=1.5",
            "bad config: actor_rollout_ref.actor.optim.lr_warmup_steps_ratio=1.5 is invalid; expected in [0, 1]",
        ),
        (
            "actor_rollout_ref.actor.optim.weight_decay=-0.1",
            "bad config: actor_rollout_ref.actor.optim.weight_decay=-0.1 is invalid; expected finite and >= 0",
        ),
        ("critic.optim.eps=0", "bad config: critic.optim.eps=0.0 is invalid; expected finite and > 0"),
        (
            "actor_rollout_ref.actor.optim.betas=[0.9,1.5]",
            "bad config: actor_rollout_ref.actor.optim.betas=[0.9, 1.5] is invalid; expected two values in [0, 1)",
        ),
        (
            "critic.optim.betas=[0.9]",
            "bad config: critic.optim.betas=[0.9] is invalid; expected two values in [0, 1)",
        ),
        (
            "actor_rollout_ref.ref.log_prob_max_token_len_per_gpu=0",
            "bad config: actor_rollout_ref.ref.log_prob_max_token_len_per_gpu=0 is invalid; expected > 0",
        ),
        (
            "actor_rollout_ref.rollout.multi_turn.max_assistant_turns=0",
            "bad config: actor_rollout_ref.rollout.multi_turn.max_assistant_turns=0 is invalid; expected >= 1 (or null)",
        ),
    ],
)
def test_a_shared_section_refuses_at_the_path_it_sits_at(override, message):
    with pytest.raises(ConfigError) as info:
        compose_config(["device=cpu", override])
    assert str(info.value).startswith(message) and "\n" not in str(info.value)


def test_the_same_rules_hold_for_a_config_built_in_python():
    cfg = SiirlConfig()
    validate_sections(cfg, SiirlConfig)
    cfg.actor_rollout_ref.rollout.val_kwargs.top_p = 0.0
    with pytest.raises(ConfigError, match=r"^bad config: actor_rollout_ref.rollout.val_kwargs.top_p=0.0 is invalid"):
        validate_sections(cfg, SiirlConfig)


def test_a_checked_list_default_is_each_instances_own():
    first, second = SiirlConfig(), SiirlConfig()
    first.actor_rollout_ref.actor.optim.betas[0] = 0.5
    assert second.actor_rollout_ref.actor.optim.betas == [0.9, 0.999]
    assert first.critic.optim.betas == [0.9, 0.999]
