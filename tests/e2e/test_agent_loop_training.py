"""Two GRPO steps whose rollout is a user's agent loop (verl's ``agent_loop_config_path`` with a
``_target_``): a wrong answer gets a ``No.`` turn and a second try, and the batch the actor trains on holds
those turns as context (``response_mask`` 0) and the loop's own rewards."""

from pathlib import Path

import pytest
import torch

from .agent_loop_runs import inserted_context, train_two_steps
from .agent_loop_user import FEEDBACK

pytestmark = pytest.mark.slow


def test_a_user_agent_loop_trains_two_steps(tmp_path: Path, ray_session):
    torch.set_num_threads(1)
    entry = "- name: retry\n  _target_: tests.e2e.agent_loop_user.RetryOnWrong\n  max_tries: 2\n"
    for record in train_two_steps(tmp_path, entry, "retry"):
        assert record["agent/errors"] == 0.0 and record["agent/own_reward_rate"] == 1.0, record
    retried = 0
    for inserted in inserted_context(tmp_path):
        if inserted:
            retried += 1
            assert FEEDBACK in inserted, inserted
    assert retried > 0  # some first answers were wrong: their second try trained after the loop's turn
