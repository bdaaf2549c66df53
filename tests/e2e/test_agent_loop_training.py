"""Two GRPO steps whose rollout is a user's agent loop (verl's ``agent_loop_config_path`` with a
``_target_``): a wrong answer gets a ``No.`` turn and a second try, and the batch the actor trains on holds
those turns as context (``response_mask`` 0) and the loop's own rewards."""

from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from .agent_loop_user import FEEDBACK
from .e2e_helpers import read_metrics, run_main

pytestmark = pytest.mark.slow


def test_a_user_agent_loop_trains_two_steps(tmp_path: Path, ray_session):
    torch.set_num_threads(1)
    loops = tmp_path / "agent.yaml"
    loops.write_text("- name: retry\n  _target_: tests.e2e.agent_loop_user.RetryOnWrong\n  max_tries: 2\n")
    dumps, run_dir = tmp_path / "dumps", tmp_path / "run"
    code = run_main(
        run_dir, "trainer.total_training_steps=2", "data.return_raw_chat=true", "data.max_response_length=32",
        f"actor_rollout_ref.rollout.agent.agent_loop_config_path={loops}",
        "actor_rollout_ref.rollout.agent.default_agent_loop=retry",
        # the dump of each step's rollout is the batch that step trains on
        "actor_rollout_ref.rollout.skip.enable=true", f"actor_rollout_ref.rollout.skip.dump_dir={dumps}",
        "actor_rollout_ref.rollout.skip.max_dump_step=2",
    )
    assert code == 0
    steps = [r for r in read_metrics(run_dir) if "actor/pg_loss" in r]
    assert [r["step"] for r in steps] == [1, 2]
    for record in steps:
        assert record["agent/errors"] == 0.0 and record["agent/own_reward_rate"] == 1.0, record
    from siirl.engine.workers.model_loading import load_tokenizer
    from siirl.params.model import ModelConfig
    from siirl.tasks import default_model_path

    tokenizer = load_tokenizer(ModelConfig(path=default_model_path()))
    retried = 0
    for dump in sorted(dumps.glob("step_*/rank_*.safetensors")):
        batch = load_file(dump)
        width = batch["responses"].shape[1]
        for row in range(batch["responses"].shape[0]):
            present = batch["attention_mask"][row, -width:].bool()
            inserted = batch["responses"][row][present & ~batch["response_mask"][row].bool()]
            if len(inserted):
                retried += 1
                assert FEEDBACK in tokenizer.decode(inserted), tokenizer.decode(inserted)
    assert retried > 0  # some first answers were wrong: their second try trained after the loop's turn
