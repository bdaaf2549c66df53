"""The original siiRL's embodied layout (its OpenVLA-OFT on LIBERO scripts) is read as the EMBODIED workflow's
keys, with one warning per section, and what it sets takes effect: the env, the sampling bounds, the reward
scale."""

import logging

import pytest
import torch
from config_testutils import typed_config
from tensordict import TensorDict

from siirl.data_coordinator.tensordict_ops import set_non_tensor_list
from siirl.engine.reward.env_rewards import ProgressRewards
from siirl.errors import ConfigError, SiirlUserError
from siirl.main_dag import prepare
from siirl.params.siirl_embodied_layout import translate_embodied_layout
from siirl.user_interface.filters import embodied_sampling

#: The layout's keys as its libero_spatial script sets them (the fixture has the whole script).
LAYOUT = [
    "data.dataset_type=embodied", "reward_model.reward_manager=embodied",
    "reward_model.reward_kwargs.action_token_len=7", "reward_model.reward_kwargs.reward_coef=5.0",
    "algorithm.workflow_type=embodied", "algorithm.filter_groups.enable=True",
    "algorithm.embodied_sampling.filter_accuracy=True", "algorithm.embodied_sampling.accuracy_lower_bound=0.1",
    "algorithm.embodied_sampling.accuracy_upper_bound=0.9", "algorithm.embodied_sampling.filter_truncated=False",
    "algorithm.embodied_sampling.oversample_factor=1", "actor_rollout_ref.model.model_type=embodied",
    "actor_rollout_ref.rollout.response_length=512",
    "actor_rollout_ref.embodied.embodied_type=openvla-oft", "actor_rollout_ref.embodied.action_chunks_len=8",
    "actor_rollout_ref.embodied.unnorm_key=libero_spatial", "actor_rollout_ref.embodied.env.env_type=libero",
    "actor_rollout_ref.embodied.env.env_name=libero_spatial", "actor_rollout_ref.embodied.env.num_envs=16",
    "actor_rollout_ref.embodied.env.max_steps=512", "actor_rollout_ref.embodied.env.num_steps_wait=10",
]


def test_the_layout_becomes_the_embodied_workflows_keys_with_one_warning_per_section(caplog):
    with caplog.at_level(logging.WARNING, logger="siirl.params.siirl_embodied_layout"):
        out = translate_embodied_layout([*LAYOUT, "trainer.total_training_steps=2"])
    assert out == [
        "algorithm.embodied.reward_scale=5.0",
        "algorithm.workflow_type=embodied",
        "algorithm.embodied.sampling.min_success_rate=0.1", "algorithm.embodied.sampling.max_success_rate=0.9",
        "env.action_chunk=8", "env.name=libero", "env.kwargs.suite=libero_spatial", "env.num_workers=16",
        "env.kwargs.max_steps=512",
        "env.kwargs.num_steps_wait=10", "trainer.total_training_steps=2",
    ]
    sections = [r.getMessage().split(": ")[1].split(" is read")[0] for r in caplog.records]
    assert sections == [
        "data.dataset_type", "reward_model.reward_manager", "reward_model.reward_kwargs.*",
        "algorithm.filter_groups.enable", "algorithm.embodied_sampling.*", "actor_rollout_ref.model.model_type",
        "actor_rollout_ref.rollout.response_length", "actor_rollout_ref.embodied.*",
        "actor_rollout_ref.embodied.env.*",
    ]
    env = caplog.records[-1].getMessage()
    assert "env_type -> env.name, env_name -> env.kwargs.suite, num_envs -> env.num_workers" in env
    assert "action_chunks_len -> env.action_chunk" in caplog.text
    assert "embodied_type, unnorm_key (a setting of the OpenVLA-OFT policy" in caplog.text


def test_without_filter_accuracy_the_bounds_are_not_applied_and_the_rest_is_untouched():
    out = translate_embodied_layout(["algorithm.embodied_sampling.accuracy_lower_bound=0.1", "data.train_batch_size=8"])
    assert out == ["data.train_batch_size=8"]
    switched_off = ["algorithm.embodied_sampling.filter_accuracy=True", "algorithm.embodied_sampling.accuracy_lower_bound=0.1",
                    "algorithm.embodied_sampling.filter_accuracy=False"]
    assert translate_embodied_layout(switched_off) == []  # the last switch wins
    plain = ["reward_model.reward_manager=naive", "algorithm.filter_groups.enable=true"]
    assert translate_embodied_layout(plain) == plain  # no layout key: siiRL's own meaning


def test_an_unknown_layout_key_and_an_unimplemented_value_are_one_line():
    with pytest.raises(ConfigError, match=r"^bad config: unknown key actor_rollout_ref.embodied.env.nm_envs of the "):
        translate_embodied_layout(["actor_rollout_ref.embodied.env.nm_envs=4"])
    with pytest.raises(ConfigError, match="filter_truncated=True: dropping tasks with a truncated episode is not"):
        translate_embodied_layout(["algorithm.embodied_sampling.filter_truncated=True"])


def test_the_layout_plans_as_the_embodied_workflow_on_libero(monkeypatch):
    from siirl.environment import libero, libero_setup

    if libero_setup.libero_package() is None:  # this venv: refused before Ray, in one line
        with pytest.raises(SiirlUserError, match=r"^env.name=libero needs libero, .*run: pip install -c ci/"):
            prepare(["device=cpu", *LAYOUT])
        monkeypatch.setattr(libero.LiberoEnv, "preflight", staticmethod(lambda **_kwargs: None))
    cfg, _, graph, _ = prepare(["device=cpu", *LAYOUT, "data.max_prompt_length=256"])
    assert graph.graph_id == "embodied" and cfg.env.name == "libero"
    assert cfg.env.kwargs == {"suite": "libero_spatial", "max_steps": 512, "num_steps_wait": 10}
    # no model path: the embedded VLA, lengths raised to one image prompt and one 8 x 7 action chunk
    assert cfg.actor_rollout_ref.model.path.endswith("tiny_qwen2_vl") and cfg.env.action_chunk == 8
    assert (cfg.data.max_prompt_length, cfg.data.max_response_length) == (256, 56)
    assert (cfg.env.num_workers, cfg.env.max_envs) == (16, None)
    sampling = cfg.algorithm.embodied.sampling
    assert (sampling.min_success_rate, sampling.max_success_rate, cfg.algorithm.embodied.reward_scale) == (0.1, 0.9, 5.0)


def _groups(successes: list[list[bool]]) -> TensorDict:
    flat = [ok for group in successes for ok in group]
    batch = TensorDict({"task_success": torch.tensor(flat), "row": torch.arange(len(flat))}, [len(flat)])
    set_non_tensor_list(batch, "uid", [f"t{g}" for g, group in enumerate(successes) for _ in group])
    return batch


def test_embodied_sampling_keeps_groups_within_the_success_rate_bounds():
    # success rates 0/4, 1/4, 2/4, 4/4; bounds [0.1, 0.5] keep the middle two
    batch = _groups([[False] * 4, [True, False, False, False], [True, True, False, False], [True] * 4])
    bounded = typed_config({"algorithm": {"embodied": {"sampling": {"min_success_rate": 0.1, "max_success_rate": 0.5}}}})
    assert embodied_sampling(batch, config=bounded).batch["row"].tolist() == [4, 5, 6, 7, 8, 9, 10, 11]
    assert embodied_sampling(batch).batch["row"].tolist() == list(range(12))  # default: only all-solved dropped


def test_reward_scale_multiplies_every_trajectory_reward():
    batch = TensorDict({
        "response_mask": torch.ones(2, 2, dtype=torch.long), "task_success": torch.tensor([1.0, 0.0]),
        "env_error": torch.zeros(2), "traj_signature": torch.zeros(2, 1), "env_progress": torch.tensor([1.0, 0.5]),
    }, [2])
    set_non_tensor_list(batch, "uid", ["t", "u"])
    scores, _ = ProgressRewards(0.6, 1.0, scale=5.0)(batch)
    assert scores[:, -1].tolist() == pytest.approx([5.0, 5.0 * 0.6 * 0.5])
