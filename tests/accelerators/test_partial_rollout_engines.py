"""Partial rollouts on vLLM and SGLang (``continue_sequences``) against the fakes, and on vLLM's real CPU build
where installed (``real-vllm``; SGLang has no CPU build here, docs/hardware.md): pieces reproduce the whole
generation, every token is tagged with the version of its piece, finished rows are not sent again, and the
sampled tokens' log-probs come from the engine itself. The refusal of an uncapped piece is in the config."""

from __future__ import annotations

from contextlib import contextmanager

import pytest
import torch

from siirl.config_checks import load_config
from siirl.engine.rollout.partial import VERSION_KEY, generate_tagged
from siirl.errors import ConfigError
from tests.partial_testutils import generate_partial

from . import test_sglang_engine, test_vllm_engine
from .accel_testutils import EOS, prompt_batch
from .test_vllm_log_probs import _actor_log_probs

#: name -> (the engine's maker, the fixtures that install its library, the maker's device)
ENGINES = {
    "vllm": (test_vllm_engine.make_engine, ("fake_cuda", "fake_vllm"), "cuda"),
    "real-vllm": (test_vllm_engine.make_engine, ("real_vllm",), "cpu"),
    "sglang": (test_sglang_engine.make_engine, ("fake_cuda", "fake_sglang"), "cuda"),
}
CHUNK = 2


class NewVersionEveryPiece:
    """A chunk guard: piece ``k`` samples as version ``k`` (no weights change, so greedy tokens must not)."""

    def __init__(self, every_piece: bool = True) -> None:
        self.every_piece, self.pieces = every_piece, 0

    @contextmanager
    def __call__(self):
        version = self.pieces if self.every_piece else 0
        self.pieces += 1
        yield version


def _engine(request, name: str, tiny_model_dir, **overrides):
    """The engine on its library (installed by the fixtures named in ``ENGINES``), and what its ``generate``
    calls were handed: vLLM's prompts and parameters (``spy_engine_calls``), the fake SGLang's own record."""
    make, fixtures, device = ENGINES[name]
    package = [request.getfixturevalue(fixture) for fixture in fixtures][-1]
    seen = (test_vllm_engine.spy_engine_calls(package, request.getfixturevalue("monkeypatch"))
            if name.endswith("vllm") else package.CALLS)
    engine = make(tiny_model_dir, backend=device, model_overrides={"dtype": "float32"}, **overrides)
    engine.records_log_probs = True  # as asynchronous training sets it
    return engine, seen


def _rows_sent(seen, name: str) -> list[int]:
    """Rows in each ``generate`` call: vLLM's requests times their ``n``; SGLang's requests (one per row)."""
    if name.endswith("vllm"):
        return [len(prompts) * params.n for prompts, params in zip(seen["prompts"], seen["generate"], strict=True)]
    return [len(payload["input_ids"]) for call, payload in seen if call == "generate"]


@pytest.mark.parametrize("name", sorted(ENGINES))
def test_greedy_pieces_reproduce_the_whole_generation(request, tiny_model_dir, name):
    engine, seen = _engine(request, name, tiny_model_dir, do_sample=False, n=2)
    batch = prompt_batch(seed=3)
    whole = generate_tagged(engine, batch, NewVersionEveryPiece(every_piece=False))
    for calls in seen.values() if isinstance(seen, dict) else [seen]:
        calls.clear()
    pieces = generate_partial(engine, batch, chunk_tokens=CHUNK, chunk=NewVersionEveryPiece())
    for key in ("responses", "response_mask", "input_ids", "attention_mask", "position_ids"):
        assert torch.equal(whole[key], pieces[key]), key
    mask = pieces["response_mask"].bool()
    lengths = mask.sum(-1)
    ended = pieces["responses"].gather(1, (lengths - 1)[:, None]).squeeze(1) == EOS
    assert ended.any() and (lengths == engine.max_response_length).any(), "some rows end early, some run to R"
    positions = torch.arange(mask.shape[1]).expand_as(mask)
    assert torch.equal(pieces[VERSION_KEY][mask], (positions // CHUNK)[mask])  # token t: piece t // 2
    assert (pieces[VERSION_KEY][~mask] == -1).all()
    # a row that has ended (end-of-sequence, not the piece's cap) is not sent again
    pieces_run = -(-engine.max_response_length // CHUNK)
    expected = [int((lengths > CHUNK * k).sum()) for k in range(pieces_run)]
    if name.endswith("vllm"):  # greedy: vLLM refuses n > 1, so the first piece samples each prompt once, copied
        expected[0] //= 2
    assert _rows_sent(seen, name) == expected
    assert "rollout_log_probs" not in pieces.keys()  # noqa: SIM118 (greedy: nothing to correct for)


@pytest.mark.parametrize("name", ["vllm", "real-vllm"])
def test_vllm_pieces_read_each_prompt_once_and_cap_the_piece(request, tiny_model_dir, name):
    """The first piece sends each prompt once with n samples; later ones each row alone, its prefix appended."""
    engine, seen = _engine(request, name, tiny_model_dir, do_sample=False, n=2)
    batch = prompt_batch(seed=3)
    out = generate_partial(engine, batch, chunk_tokens=CHUNK, chunk=NewVersionEveryPiece())
    (first, second), (first_params, second_params) = seen["prompts"][:2], seen["generate"][:2]
    prompts = [row[m.bool()].tolist() for row, m in zip(batch["input_ids"], batch["attention_mask"])]
    # greedy: one sample per prompt (vLLM refuses n > 1 there), copied to the group's n rows
    assert first == prompts and (first_params.n, first_params.max_tokens) == (1, CHUNK)
    unfinished = [r for r in range(out.batch_size[0]) if out["response_mask"][r].sum() > CHUNK]
    expected = [prompts[r // 2] + out["responses"][r, :CHUNK].tolist() for r in unfinished]
    assert second == expected and second_params.n == 1


@pytest.mark.parametrize("name", sorted(ENGINES))
def test_sampled_pieces_record_the_engines_log_probs(request, tiny_model_dir, name):
    """Sampled at T=0.7 (top-k / top-p off): each piece's log-probs are the actor's log-softmax(logits / T) of
    the tokens it sampled, 0 past the response; neither engine returns entropies."""
    engine, _ = _engine(request, name, tiny_model_dir, temperature=0.7, top_p=1.0, top_k=-1, n=2)
    out = generate_partial(engine, prompt_batch(seed=1), chunk_tokens=CHUNK, chunk=NewVersionEveryPiece())
    mask = out["response_mask"].bool()
    assert mask.sum(-1).max() > CHUNK, "some response spans pieces"
    recorded = out["rollout_log_probs"]
    expected = _actor_log_probs(tiny_model_dir, out, 0.7)
    torch.testing.assert_close(recorded[mask], expected[mask], atol=1e-5, rtol=0)
    assert not recorded[~mask].any() and "rollout_entropys" not in out.keys()  # noqa: SIM118


@pytest.mark.parametrize("name", ["vllm", "sglang"])
def test_an_uncapped_piece_is_refused_before_ray(name):
    """These engines' ``generate`` cannot stop mid-piece: without chunk_tokens a piece is a whole response."""
    partial = ["trainer.v1.trainer_mode=colocate_async", "async_training.partial_rollout=true",
               f"actor_rollout_ref.rollout.name={name}"]
    assert load_config([*partial, "async_training.chunk_tokens=8"]).async_training.partial_rollout
    with pytest.raises(ConfigError) as raised:
        load_config([*partial, "async_training.chunk_tokens=null"])
    message = str(raised.value)
    assert f"async_training.chunk_tokens=null with partial rollouts on the '{name}'" in message and "\n" not in message
