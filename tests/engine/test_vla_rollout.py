"""The embedded tiny Qwen2-VL as a vision-language-action policy on LIBERO (the fake here; the real simulator
in ci/tier_libero.sh): image + instruction prompts, action-token chunks, per-task success rates."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from engine_testutils import single_sample_hf_engine
from tensordict import TensorDict

from siirl.data_coordinator.prompt_encoding import PromptEncoder
from siirl.data_coordinator.tensordict_ops import non_tensor_list, set_non_tensor_list
from siirl.embedded_assets import default_vlm_model_path
from siirl.engine.rollout.action_tokens import ActionTokenizer
from siirl.engine.rollout.env_session import EnvSession
from siirl.engine.rollout.env_steps import EnvStepRollout
from siirl.engine.rollout.vla_prompts import VlaPrompts
from siirl.engine.workers.vision import load_image_processor
from siirl.engine.workers.vision_inputs import MULTIMODAL_INPUTS
from siirl.environment.libero import NOOP_ACTION
from siirl.params.environment import EnvConfig
from siirl.params.model import ModelConfig
from tests.fakes.libero_install import forget_fake_libero, install_fake_libero

CHUNK = 2


@pytest.fixture(scope="module")
def policy():
    tokenizer, rollout, inner = single_sample_hf_engine(default_vlm_model_path(), 7 * CHUNK)
    return tokenizer, rollout, inner, load_image_processor(ModelConfig(path=default_vlm_model_path()))


def test_action_tokens_are_the_last_plain_tokens_and_round_trip(policy):
    tokenizer = policy[0]
    codec = ActionTokenizer(tokenizer, dims=7, chunk=2)
    assert codec.response_length == 14 and len(codec.token_ids) == 256
    assert not set(codec.token_ids.tolist()) & set(tokenizer.all_special_ids)
    actions = np.array([[-1.0, -0.5, 0.0, 0.25, 0.5, 0.999, 1.0], [0.1] * 7])
    back = codec.decode(codec.encode(actions))
    assert back.shape == (2, 7) and np.abs(back - actions).max() <= 1 / 256 + 1e-9
    # A token outside the bins reads as the nearest bin; a short response ends with the no-op action.
    out = codec.decode([tokenizer.eos_token_id, int(codec.token_ids[-1]) + 1, *codec.encode([0.0] * 3)], NOOP_ACTION)
    assert out[0, 0] == codec.centers[0] and out[0, 1] == codec.centers[-1]
    assert np.allclose(out[0, 2:5], 0.0, atol=1 / 256) and out[0, 6] == -1.0 and (out[1] == NOOP_ACTION).all()
    with pytest.raises(ValueError, match="fewer than the 300 action bins"):
        ActionTokenizer(tokenizer, bins=300)


def test_vla_steps_on_libero(policy, monkeypatch, tmp_path, repo_root):
    tokenizer, rollout, inner, images = policy
    install_fake_libero(monkeypatch, tmp_path, repo_root)
    try:
        env = EnvConfig(name="libero", num_workers=0, max_envs=3,  # waves of 3 + 1 split a task's group
                        kwargs={"camera_size": 32, "num_steps_wait": 0, "max_steps": 4})
        session = EnvSession(inner, tokenizer, rollout, env)
        width = 200
        steps = EnvStepRollout(
            session, max_turns=3, max_prompt_length=width, max_response_length=7 * CHUNK,
            vla_prompts=VlaPrompts(tokenizer, images, width), actions=ActionTokenizer(tokenizer, 7, CHUNK),
            noop=NOOP_ACTION,
        )
        encoder = PromptEncoder(tokenizer, 16, "error", True)
        rows = TensorDict(encoder.encode([[{"role": "user", "content": p}] for p in ("a", "b")], str), [2])
        set_non_tensor_list(rows, "index", [0, 1])
        out = steps.generate(rows, validate=True)
        session.close()
    finally:
        forget_fake_libero()
    count = out.batch_size[0]
    assert 4 <= count <= 12  # 2 tasks x 2 trajectories, each 2 chunks of 2 actions (max_steps 4)
    prompt = tokenizer.decode(out["prompts"][0][out["prompts"][0] != tokenizer.pad_token_id])
    assert "<|image_pad|>" in prompt and "What action should the robot take to move the gripper to goal 0?" in prompt
    inputs = non_tensor_list(out, MULTIMODAL_INPUTS)
    assert len(inputs) == count and all(i["image_grid_thw"].tolist() == [[1, 8, 8]] for i in inputs)
    assert (out["response_mask"].sum(-1) <= 7 * CHUNK).all() and (out["traj_steps"] <= 2).all()
    metrics = steps.rollout_metrics(out)
    assert set(metrics) >= {"env/success_rate", "env/success_rate/task_0", "env/success_rate/task_1"}
    assert torch.equal(out["env_task_id"].unique(), torch.tensor([0, 1]))
    trajectories = set(non_tensor_list(out, "traj_uid"))
    assert len(trajectories) == 4 and len({t.split("/")[0] for t in trajectories}) == 2
