"""Two GRPO steps through verl's langgraph recipe (``agent_loop_config_path`` naming a ``ReactAgentLoop``
subclass with a stand-in graph): runs where the ``agents`` extra is installed (ci/tier_agents.sh); the batch
each step trains on holds the reviewer's turn as context between the model's two answers."""

from pathlib import Path

import pytest
import torch

from .agent_loop_runs import inserted_context, train_two_steps

pytestmark = pytest.mark.slow
pytest.importorskip("langgraph")  # the agents extra (ci/tier_agents.sh); skipped before any Ray starts


def test_the_langgraph_recipe_trains_two_steps(tmp_path: Path, ray_session):
    from .langgraph_user import REVIEW

    torch.set_num_threads(1)
    entry = "- name: reviewed\n  _target_: tests.e2e.langgraph_user.ReviewedAgentLoop\n"
    for record in train_two_steps(tmp_path, entry, "reviewed"):
        assert record["agent/errors"] == 0.0 and record["agent/turns"] == 4.0, record
    for inserted in inserted_context(tmp_path):
        assert inserted == f"<|user|>{REVIEW}<|assistant|>"
