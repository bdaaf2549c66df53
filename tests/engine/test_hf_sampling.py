"""The HF engine's draw: the softmax's distribution, one token per row, warpers in generate's order."""

import torch
from transformers import TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper

from siirl.engine.rollout.hf_sampling import InverseCdfSampler, sampling_processors
from siirl.engine.rollout.sampling import SamplingParams


def _params(**overrides) -> SamplingParams:
    return SamplingParams(**{"n": 1, "do_sample": True, "temperature": 1.0, "top_p": 1.0, "top_k": -1, **overrides})


def test_draws_follow_the_softmax_and_never_a_masked_token():
    torch.manual_seed(0)
    probs = torch.tensor([0.5, 0.3, 0.2, 0.0])
    scores = probs.log().expand(40_000, 4).clone()
    out = InverseCdfSampler()(torch.zeros(40_000, 1, dtype=torch.long), scores)
    chosen = out.argmax(-1)
    assert torch.isinf(out).sum(-1).eq(3).all()  # exactly one finite score per row
    share = torch.bincount(chosen, minlength=4).double() / len(chosen)
    assert share[3] == 0
    assert torch.allclose(share, probs.double(), atol=0.01)


def test_processors_mirror_what_generate_builds_when_sampling():
    kinds = [type(p) for p in sampling_processors(_params(temperature=0.7, top_k=5, top_p=0.9))]
    assert kinds == [TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper, InverseCdfSampler]
    assert [type(p) for p in sampling_processors(_params())] == [InverseCdfSampler]
    assert sampling_processors(_params(do_sample=False)) == []
    assert sampling_processors(_params(temperature=0.0)) == []


def test_top_k_one_draws_the_argmax():
    scores = torch.randn(64, 50)
    out = scores
    for processor in sampling_processors(_params(top_k=1)):
        out = processor(torch.zeros(64, 1, dtype=torch.long), out)
    assert torch.equal(out.argmax(-1), scores.argmax(-1))
