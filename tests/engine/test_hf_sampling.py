"""The HF engine's draw: the softmax's distribution, one token per row, warpers in generate's order."""

import pytest
import torch
from transformers import TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper

from siirl.device.registry import BACKENDS
from siirl.engine.rollout.hf_sampling import InverseCdfSampler, generation_kwargs, sampling_processors
from siirl.engine.rollout.sampling import SamplingParams


def _params(**overrides) -> SamplingParams:
    return SamplingParams(
        **{"n": 1, "do_sample": True, "temperature": 1.0, "top_p": 1.0, "top_k": -1, **overrides}
    )


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
    kinds = [type(p) for p in sampling_processors(_params(temperature=0.7, top_k=5, top_p=0.9), True)]
    assert kinds == [TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper, InverseCdfSampler]
    assert [type(p) for p in sampling_processors(_params(), True)] == [InverseCdfSampler]
    assert sampling_processors(_params(do_sample=False), True) == []
    assert sampling_processors(_params(temperature=0.0), True) == []


def test_top_k_one_draws_the_argmax():
    scores = torch.randn(64, 50)
    out = scores
    for processor in sampling_processors(_params(top_k=1), True):
        out = processor(torch.zeros(64, 1, dtype=torch.long), out)
    assert torch.equal(out.argmax(-1), scores.argmax(-1))


@pytest.mark.parametrize("family", ["cpu", "cuda", "npu"])
def test_generate_samples_itself_where_the_family_has_no_float64(family):
    """Ascend's softmax and cumsum have no float64: there ``generate`` keeps its own multinomial sampling."""
    draws_itself = BACKENDS.get(family).inverse_cdf_sampling
    params = _params(temperature=0.7, top_k=5)
    kwargs = generation_kwargs(params, draws_itself)
    assert draws_itself == (family != "npu")
    assert kwargs["do_sample"] is not draws_itself
    assert bool(sampling_processors(params, draws_itself)) is draws_itself
    if not draws_itself:
        assert (kwargs["temperature"], kwargs["top_k"], kwargs["top_p"]) == (0.7, 5, 1.0)
