"""Old log-probs recorded while sampling equal the actor's recomputation; the config picks the source."""

from __future__ import annotations

import pytest
import torch
from engine_testutils import model_config
from tensordict import TensorDict
from test_rollout_hf import RESPONSE, _prompts

from siirl.config_checks import load_config
from siirl.engine.rollout import make_rollout_engine
from siirl.engine.workers import ActorWorker
from siirl.errors import ConfigError
from siirl.params.model import ActorConfig, RolloutConfig


@pytest.mark.parametrize("sampling", [{"temperature": 1.0}, {"temperature": 0.7, "top_k": 3, "top_p": 0.9}])
def test_recorded_log_probs_match_the_actor(tiny_model_dir, single_process_group, sampling):
    """Top-k / top-p cut what is sampled, never the distribution recorded: log-softmax(logits / T)."""
    rollout_cfg = RolloutConfig(n=4, **sampling)
    engine = make_rollout_engine(
        "hf", model_cfg=model_config(tiny_model_dir), rollout_cfg=rollout_cfg, backend="cpu",
        max_response_length=RESPONSE,
    )
    engine.records_log_probs = True
    actor = ActorWorker(
        model_config(tiny_model_dir), ActorConfig(), "cpu", rollout_n=4,
        temperature=sampling["temperature"], log_prob_cfg=rollout_cfg,
    )
    engine.sync_weights(actor.named_parameters_for_sync())
    torch.manual_seed(0)  # sampling draws from the global generator: earlier tests in this process move it
    out = engine.generate(_prompts(6, seed=3))
    mask = out["response_mask"].bool()
    assert mask.sum() > 12 and (~mask).any(), "responses of several lengths"
    recomputed = actor.compute_log_prob(out)
    torch.testing.assert_close(out["rollout_log_probs"][mask], recomputed["old_log_probs"][mask], atol=1e-5, rtol=0)
    torch.testing.assert_close(out["rollout_entropys"][mask], recomputed["entropys"][mask], atol=1e-5, rtol=0)
    assert not out["rollout_log_probs"][~mask].any() and not out["rollout_entropys"][~mask].any()
    assert (out["rollout_log_probs"][mask] < 0).all()


def test_engine_records_nothing_unless_asked_or_when_greedy(tiny_model_dir):
    cfg = RolloutConfig(n=2)
    engine = make_rollout_engine(
        "hf", model_cfg=model_config(tiny_model_dir), rollout_cfg=cfg, backend="cpu", max_response_length=RESPONSE
    )
    assert "rollout_log_probs" not in engine.generate(_prompts(2)).keys()  # noqa: SIM118
    engine.records_log_probs = True
    assert "rollout_log_probs" in engine.generate(_prompts(2)).keys()  # noqa: SIM118
    greedy = engine.generate(_prompts(2), validate=True)  # validation samples greedily: nothing to record
    assert "rollout_log_probs" not in greedy.keys()  # noqa: SIM118


KEY = "actor_rollout_ref.actor.old_log_prob_source"


def _device(overrides: list[str]) -> str:
    """vLLM and SGLang are GPU engines: on device=cpu the run would roll out with hf instead."""
    gpu = {"actor_rollout_ref.rollout.name=vllm", "actor_rollout_ref.rollout.name=sglang"}
    return "device=cuda" if gpu & set(overrides) else "device=cpu"


@pytest.mark.parametrize(
    ("overrides", "resolved"),
    [
        ([], "rollout"),  # HF engine, float32 on the CPU: exact
        ([f"{KEY}=recompute"], "recompute"),
        (["actor_rollout_ref.model.dtype=bfloat16"], "recompute"),  # auto stays exact-only
        (["actor_rollout_ref.model.dtype=bfloat16", f"{KEY}=rollout"], "rollout"),  # asked for: allowed
        (["actor_rollout_ref.rollout.name=vllm"], "recompute"),  # vLLM's numbers are approximate
        (["actor_rollout_ref.rollout.name=vllm", f"{KEY}=rollout"], "rollout"),  # asked for: allowed
        (["actor_rollout_ref.rollout.multi_turn.enable=true"], "recompute"),
    ],
)
def test_auto_resolves_to_exact_sources_only(overrides, resolved):
    cfg = load_config([_device(overrides), *overrides])
    assert cfg.actor_rollout_ref.actor.old_log_prob_source == resolved


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ([f"{KEY}=sometimes"], "expected one of auto, recompute, rollout"),
        ([f"{KEY}=rollout", "actor_rollout_ref.rollout.name=sglang"], "the 'sglang' rollout engine cannot provide"),
        ([f"{KEY}=rollout", "actor_rollout_ref.rollout.multi_turn.enable=true"], "environment-driven rollouts"),
    ],
)
def test_impossible_sources_are_refused_in_one_line(overrides, message):
    with pytest.raises(ConfigError, match=message) as info:
        load_config([_device(overrides), *overrides])
    assert "\n" not in str(info.value)


class _CountingActor:
    def __init__(self) -> None:
        self.calls = 0

    def compute_log_prob(self, batch):
        self.calls += 1
        rows, width = batch["responses"].shape
        return TensorDict({"old_log_probs": torch.full((rows, width), -2.0), "entropys": torch.ones(rows, width)},
                          batch_size=[rows])


@pytest.mark.parametrize("from_rollout", [True, False])
def test_old_log_prob_node_uses_the_recording_instead_of_a_forward(from_rollout):
    from siirl.dag_worker.builtin_nodes import compute_old_log_prob
    from siirl.dag_worker.context import WorkerContext
    from siirl.dag_worker.policy import Policy

    batch = TensorDict({
        "responses": torch.ones(2, 3, dtype=torch.long), "response_mask": torch.tensor([[1, 1, 0], [1, 0, 0]]),
        "rollout_log_probs": torch.tensor([[-0.5, -0.25, 0.0], [-1.0, 0.0, 0.0]]),
        "rollout_entropys": torch.tensor([[0.5, 0.5, 0.0], [0.2, 0.0, 0.0]]),
    }, batch_size=[2])
    policy = Policy(_CountingActor(), None, kl_ctrl=None, old_log_probs_from_rollout=from_rollout)
    ctx = WorkerContext(cfg=None, plan=None, rank=0, backend=None, tokenizer=None, graph=None,
                        models={"actor": policy})
    out = compute_old_log_prob(batch, ctx=ctx)
    assert policy.actor.calls == (0 if from_rollout else 1)
    expected = batch["rollout_log_probs"] if from_rollout else torch.full((2, 3), -2.0)
    torch.testing.assert_close(out.batch["old_log_probs"], expected)
    assert out.metrics["actor/entropy"] == pytest.approx(0.4 if from_rollout else 1.0)


def test_old_log_probs_from_a_rollout_without_entropies():
    """vLLM returns no entropies: the recorded log-probs are still used, only the entropy metric goes."""
    from siirl.dag_worker.builtin_nodes import compute_old_log_prob
    from siirl.dag_worker.context import WorkerContext
    from siirl.dag_worker.policy import Policy

    recorded = torch.tensor([[-0.5, -0.25, 0.0]])
    batch = TensorDict({"responses": torch.ones(1, 3, dtype=torch.long), "response_mask": torch.tensor([[1, 1, 0]]),
                        "rollout_log_probs": recorded}, batch_size=[1])
    policy = Policy(_CountingActor(), None, kl_ctrl=None, old_log_probs_from_rollout=True)
    ctx = WorkerContext(cfg=None, plan=None, rank=0, backend=None, tokenizer=None, graph=None,
                        models={"actor": policy})
    out = compute_old_log_prob(batch, ctx=ctx)
    assert policy.actor.calls == 0 and "actor/entropy" not in out.metrics
    torch.testing.assert_close(out.batch["old_log_probs"], recorded)
