"""Two GRPO steps through verl's langgraph recipe (``agent_loop_config_path`` naming a ``ReactAgentLoop``
subclass with a stand-in graph): runs where the ``agents`` extra is installed (ci/tier_agents.sh); the batch
each step trains on holds the reviewer's turn as context between the model's two answers."""

from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from .e2e_helpers import read_metrics, run_main

pytestmark = pytest.mark.slow
pytest.importorskip("langgraph")  # the agents extra (ci/tier_agents.sh); skipped before any Ray starts


def test_the_langgraph_recipe_trains_two_steps(tmp_path: Path, ray_session):
    from .langgraph_user import REVIEW

    torch.set_num_threads(1)
    loops = tmp_path / "agent.yaml"
    loops.write_text("- name: reviewed\n  _target_: tests.e2e.langgraph_user.ReviewedAgentLoop\n")
    dumps, run_dir = tmp_path / "dumps", tmp_path / "run"
    code = run_main(
        run_dir, "trainer.total_training_steps=2", "data.return_raw_chat=true", "data.max_response_length=32",
        f"actor_rollout_ref.rollout.agent.agent_loop_config_path={loops}",
        "actor_rollout_ref.rollout.agent.default_agent_loop=reviewed",
        "actor_rollout_ref.rollout.skip.enable=true", f"actor_rollout_ref.rollout.skip.dump_dir={dumps}",
        "actor_rollout_ref.rollout.skip.max_dump_step=2",
    )
    assert code == 0
    steps = [r for r in read_metrics(run_dir) if "actor/pg_loss" in r]
    assert [r["step"] for r in steps] == [1, 2]
    for record in steps:
        assert record["agent/errors"] == 0.0 and record["agent/turns"] == 4.0, record
    from siirl.engine.workers.model_loading import load_tokenizer
    from siirl.params.model import ModelConfig
    from siirl.tasks import default_model_path

    tokenizer = load_tokenizer(ModelConfig(path=default_model_path()))
    dumped = sorted(dumps.glob("step_*/rank_*.safetensors"))
    assert dumped
    for dump in dumped:
        batch = load_file(dump)
        width = batch["responses"].shape[1]
        for row in range(batch["responses"].shape[0]):
            present = batch["attention_mask"][row, -width:].bool()
            inserted = batch["responses"][row][present & ~batch["response_mask"][row].bool()]
            assert tokenizer.decode(inserted) == f"<|user|>{REVIEW}<|assistant|>"
