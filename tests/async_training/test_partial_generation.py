"""Partial rollouts on the embedded model: generating in pieces with a weight sync between them."""

from contextlib import contextmanager

import pytest
import torch
from tensordict import TensorDict

from siirl.config_checks import load_config
from siirl.engine.rollout.hf import HFRolloutEngine
from siirl.engine.rollout.partial import VERSION_KEY, generate_tagged
from tests.partial_testutils import generate_partial

PROBLEMS = [(1, 2), (13, 29), (7, 0), (97, 70)]


def _engine(*overrides: str) -> HFRolloutEngine:
    cfg = load_config(["device=cpu", "actor_rollout_ref.model.dtype=float32", *overrides])
    engine = HFRolloutEngine(cfg.actor_rollout_ref.model, cfg.actor_rollout_ref.rollout, "cpu",
                             max_response_length=int(cfg.data.max_response_length))
    engine.records_log_probs = True
    return engine


def _prompts(engine: HFRolloutEngine) -> TensorDict:
    chats = [[{"role": "user", "content": f"{a}+{b}="}] for a, b in PROBLEMS]
    texts = [engine.tokenizer.apply_chat_template(c, add_generation_prompt=True, tokenize=False) for c in chats]
    enc = engine.tokenizer(texts, return_tensors="pt", padding=True, padding_side="left")
    return TensorDict({"input_ids": enc["input_ids"], "attention_mask": enc["attention_mask"]}, batch_size=[len(texts)])


class Versions:
    """A chunk guard that counts pieces and moves to a new version every ``every`` pieces."""

    def __init__(self, every: int, engine=None, perturb: bool = False) -> None:
        self.every, self.pieces, self.version, self.engine, self.perturb = every, 0, 0, engine, perturb

    @contextmanager
    def __call__(self):
        if self.pieces and self.pieces % self.every == 0:
            self.version += 1
            if self.perturb:  # a visible weight change: the next pieces sample from other weights
                with torch.no_grad():
                    self.engine.model.lm_head.weight.mul_(0.5)
        self.pieces += 1
        yield self.version


@pytest.fixture(scope="module")
def greedy():
    return _engine("actor_rollout_ref.rollout.do_sample=false", "actor_rollout_ref.rollout.n=2")


def test_pieces_without_a_weight_change_reproduce_the_whole_generation(greedy):
    batch = _prompts(greedy)
    whole = generate_tagged(greedy, batch, Versions(10**9))
    pieces = generate_partial(greedy, batch, chunk_tokens=2, chunk=Versions(1))
    assert torch.equal(whole["responses"], pieces["responses"])
    assert torch.equal(whole["response_mask"], pieces["response_mask"])
    assert torch.equal(whole["input_ids"], pieces["input_ids"])
    mask = whole["response_mask"].bool()
    assert (whole[VERSION_KEY][mask] == 0).all() and (whole[VERSION_KEY][~mask] == -1).all()
    # pieces of 2 tokens, a new version every piece: token t was sampled under version t // 2
    positions = torch.arange(mask.shape[1]).expand_as(mask)
    assert torch.equal(pieces[VERSION_KEY][mask], (positions // 2)[mask])
    assert (pieces[VERSION_KEY][~mask] == -1).all()
    assert mask.sum(-1).max() > 2, "some response spans two versions"


def test_each_piece_samples_with_the_weights_loaded_before_it():
    """Sampled, with the weights changed before every piece: the recorded log-prob of each token is the
    one the weights of its own version give (recomputed here piece by piece)."""
    torch.manual_seed(0)
    engine = _engine("actor_rollout_ref.rollout.n=2")
    batch = _prompts(engine)
    base = engine.model.lm_head.weight.detach().clone()
    crossed = generate_partial(engine, batch, chunk_tokens=1, chunk=Versions(1, engine, perturb=True))
    mask = crossed["response_mask"].bool()
    versions = crossed[VERSION_KEY]
    assert mask.sum(-1).max() > 2 and versions[mask].max() >= 2, "responses span several versions"
    width = crossed["prompts"].shape[1]
    for version in sorted(set(versions[mask].tolist())):
        with torch.no_grad():
            engine.model.lm_head.weight.copy_(base * 0.5**version)
            logits = engine.model(input_ids=crossed["input_ids"], attention_mask=crossed["attention_mask"],
                                  position_ids=crossed["position_ids"]).logits
        resp_logits = logits[:, width - 1 : -1].float()
        expected = torch.log_softmax(resp_logits, -1).gather(-1, crossed["responses"].unsqueeze(-1)).squeeze(-1)
        at = mask & (versions == version)
        assert torch.allclose(crossed["rollout_log_probs"][at], expected[at], atol=2e-3), version
