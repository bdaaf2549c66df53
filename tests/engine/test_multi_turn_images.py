"""Multi-turn rollouts of a vision-language policy: every turn generates with the row's images (each turn's
sampled log-probs equal the training forward of the assembled trajectory, images included), and the
assembled rows keep the images for training."""

from __future__ import annotations

import pytest
import torch
from test_vision_rollout import KINDS, prompts
from vlm_testutils import LOOK_AGAIN, save_tiny_vlm

from siirl.data_coordinator.tensordict_ops import set_non_tensor_list
from siirl.engine.rollout import make_rollout_engine
from siirl.engine.rollout.base import RolloutEngine
from siirl.engine.rollout.env_session import EnvSession, single_sample_config
from siirl.engine.rollout.multi_turn import MultiTurnRollout
from siirl.engine.workers.actor import log_prob_reduce
from siirl.engine.workers.padding_free import response_outputs
from siirl.engine.workers.vision_inputs import MULTIMODAL_INPUTS, vision_rows
from siirl.params.environment import EnvConfig
from siirl.params.model import ModelConfig, RolloutConfig

R, OBS, TURNS = 4, 16, 3


class Recording(RolloutEngine):
    """The HF engine, each turn's batch and output kept."""

    def __init__(self, inner):
        self.inner, self.calls = inner, []

    def generate(self, batch, validate=False):
        out = self.inner.generate(batch, validate=validate)
        self.calls.append((batch, out))
        return out

    def sync_weights(self, named_tensors):
        self.inner.sync_weights(named_tensors)

    def sleep(self):
        self.inner.sleep()

    def wake_up(self):
        self.inner.wake_up()


@pytest.fixture(scope="module")
def rollout(tmp_path_factory):
    vlm_dir = save_tiny_vlm(tmp_path_factory.mktemp("vlm"))
    cfg = RolloutConfig(n=2, temperature=1.0, micro_batch_size=64)
    inner = make_rollout_engine("hf", model_cfg=ModelConfig(path=str(vlm_dir)), rollout_cfg=single_sample_config(cfg),
                                backend="cpu", max_response_length=R)
    inner.records_log_probs = True
    recording = Recording(inner)
    session = EnvSession(recording, inner.tokenizer, cfg, EnvConfig(name=LOOK_AGAIN, num_workers=0, kwargs={"steps": TURNS}))
    return MultiTurnRollout(session, max_turns=TURNS, max_response_length=R, max_observation_length=OBS), recording


def policy_runs(mask: torch.Tensor) -> list[torch.Tensor]:
    """Index tensors of each run of policy tokens in one row's response mask (one run per turn)."""
    where = mask.nonzero().flatten().tolist()
    runs, start = [], 0
    for i in range(1, len(where) + 1):
        if i == len(where) or where[i] != where[i - 1] + 1:
            runs.append(torch.tensor(where[start:i]))
            start = i
    return runs


def training_log_probs(model, out, with_images: bool):
    width = out["responses"].shape[1]
    rows = vision_rows(model, out, out["input_ids"], out["attention_mask"]) if with_images else None
    with torch.no_grad():
        return response_outputs(model, out["input_ids"], out["attention_mask"], out["position_ids"], width, "padded",
                                log_prob_reduce(1.0, with_entropy=False), True, rows)


def test_every_turn_generates_with_the_rows_images(rollout):
    engine, recording = rollout
    batch = prompts(KINDS)
    set_non_tensor_list(batch, "uid", [f"u{i}" for i in range(len(KINDS))])
    torch.manual_seed(0)
    out = engine.generate(batch)
    count = len(KINDS) * 2
    has_image = [bool(x) for x in out[MULTIMODAL_INPUTS]]
    assert len(has_image) == count and any(has_image) and not all(has_image)  # kept for training
    assert len(recording.calls) == TURNS
    for sent, _ in recording.calls:  # the images went with every turn, each row its own
        assert [bool(x) for x in sent[MULTIMODAL_INPUTS]] == has_image
    model = recording.inner.model
    want = training_log_probs(model, out, with_images=True)
    blind = training_log_probs(model, out, with_images=False)
    for row in range(count):
        runs = policy_runs(out["response_mask"][row])
        assert len(runs) == TURNS
        for turn, positions in enumerate(runs):
            turn_out = recording.calls[turn][1]
            sampled = turn_out["rollout_log_probs"][row, : len(positions)]
            assert torch.equal(turn_out["responses"][row, : len(positions)], out["responses"][row, positions])
            torch.testing.assert_close(sampled, want[row, positions], atol=1e-5, rtol=1e-5)
            if has_image[row]:  # the check can tell: without the images the forward disagrees
                assert not torch.allclose(sampled, blind[row, positions], atol=1e-4)


def test_tool_prompts_keep_each_rows_vision_blocks():
    """Re-rendered with the tools' schemas, an image row's prompt still holds its image's block (the
    image-pad count the dataloader gave it), so its ``multi_modal_inputs`` still match."""
    from vlm_testutils import build_vlm_tokenizer

    from siirl.engine.rollout.tool_prompts import render_tool_prompts

    tokenizer = build_vlm_tokenizer()
    rows = prompts(KINDS)
    before = [ids[m.bool()].tolist() for ids, m in zip(rows["input_ids"], rows["attention_mask"])]
    raw = [[{"role": "user", "content": ("<image>" if seed is not None else "") + text}] for text, seed in KINDS]
    set_non_tensor_list(rows, "raw_prompt", raw)
    render_tool_prompts(rows, tokenizer, [{"type": "function", "function": {"name": "calc"}}], tokenizer.pad_token_id)
    after = [ids[m.bool()].tolist() for ids, m in zip(rows["input_ids"], rows["attention_mask"])]
    assert after == before  # this chat template ignores tools: the same ids, vision blocks included
    assert any(tokenizer.convert_tokens_to_ids("<|image_pad|>") in ids for ids in after)
