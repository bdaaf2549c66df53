"""The teacher role's model and the actor's distillation term, in process: the teacher's log-probs are a plain
forward of ITS weights at temperature 1, and they enter the actor's loss as verl's distillation term."""

from __future__ import annotations

import pytest
import torch
from engine_testutils import actor_config, make_batch, model_config, save_tiny_model

from siirl.algorithms.kl import kl_penalty
from siirl.engine.workers import ActorWorker, ReferenceWorker
from siirl.engine.workers.base import LossScale
from siirl.params.distillation import (
    DistillationConfig,
    DistillationLossConfig,
    TeacherModelConfig,
    teacher_model_config,
)
from siirl.params.model import RefConfig

ROWS = 4


@pytest.fixture(scope="module")
def teacher_dir(tmp_path_factory):
    return save_tiny_model(tmp_path_factory.mktemp("teacher"), seed=1)  # other weights than the student's


def _teacher(student_dir, teacher_dir) -> ReferenceWorker:
    cfg = DistillationConfig(enabled=True, teacher_models={"teacher_model": TeacherModelConfig(model_path=str(teacher_dir))})
    return ReferenceWorker(teacher_model_config(model_config(student_dir), cfg), RefConfig(), "cpu", temperature=1.0)


def test_teacher_log_probs_are_its_own_forward(tiny_model_dir, teacher_dir, single_process_group):
    from transformers import AutoModelForCausalLM

    batch = make_batch(ROWS, seed=3)
    got = _teacher(tiny_model_dir, teacher_dir).compute_ref_log_prob(batch)
    model = AutoModelForCausalLM.from_pretrained(teacher_dir, dtype=torch.float32).eval()
    with torch.no_grad():
        logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                       position_ids=batch["position_ids"]).logits
    width = batch["responses"].shape[1]
    scores = torch.log_softmax(logits[:, -width - 1 : -1].float(), dim=-1)
    expected = scores.gather(-1, batch["responses"].unsqueeze(-1)).squeeze(-1) * batch["response_mask"]
    mask = batch["response_mask"].bool()
    torch.testing.assert_close(got[mask], expected[mask], atol=1e-5, rtol=1e-5)
    assert torch.all(got[~mask] == 0)


def _actor_loss(student_dir, batch, **distill):
    cfg = actor_config(loss_agg_mode="token-mean")
    actor = ActorWorker(model_config(student_dir), cfg, "cpu", distillation=DistillationLossConfig(**distill))
    out = actor._micro_loss(batch, LossScale(int(batch["response_mask"].sum()), ROWS, 1))
    return actor, out


def test_teacher_log_probs_enter_the_actors_loss(tiny_model_dir, teacher_dir, single_process_group):
    batch = make_batch(ROWS, seed=3)
    batch["teacher_log_prob"] = _teacher(tiny_model_dir, teacher_dir).compute_ref_log_prob(batch)
    actor, alone = _actor_loss(tiny_model_dir, batch, loss_mode="k3", use_policy_gradient=False, use_task_rewards=False)
    student = actor.compute_log_prob(batch, calculate_entropy=False)["old_log_probs"]
    mask = batch["response_mask"].float()
    k3 = kl_penalty(student, batch["teacher_log_prob"], "k3")
    expected = float((k3 * mask).sum() / mask.sum())
    assert expected > 1e-3  # two different models: the student is far from its teacher
    assert float(alone.loss.detach()) == pytest.approx(expected, rel=1e-4)  # the task loss is dropped
    assert float(alone.summed["distillation/loss"].detach()) == pytest.approx(expected, rel=1e-4)
    _, kept = _actor_loss(tiny_model_dir, batch, loss_mode="k3", use_policy_gradient=False, distillation_loss_coef=0.5)
    assert float(kept.loss.detach()) == pytest.approx(float(kept.summed["pg_loss"].detach()) + 0.5 * expected, rel=1e-4)
