"""docs/extending.md: its table of the built-in nodes' batch keys is the one the node contracts generate, and
its signature examples run as written (registered, called on a small batch, then forgotten)."""

import re
import sys
import types
from pathlib import Path

import pytest
import torch
from tensordict import TensorDict

from siirl.algorithms import ADV_ESTIMATORS, POLICY_LOSSES, compute_advantage, masked_mean
from siirl.algorithms.policy_loss import PolicyLossInputs
from siirl.execution.dag.contract import declared_contract
from siirl.execution.dag.contract_table import builtin_contract_table
from siirl.registry import forget_entries_of
from tests.config_testutils import typed_config

DOC = (Path(__file__).resolve().parents[2] / "docs" / "extending.md").read_text(encoding="utf-8")
MODULE = "extending_doc_examples"


def test_the_docs_table_is_the_one_the_node_contracts_generate():
    table = re.search(r"<!-- node-contracts:begin -->\n(.*?)\n<!-- node-contracts:end -->", DOC, re.DOTALL)
    assert table is not None, "docs/extending.md lost its node-contracts markers"
    assert table.group(1) == builtin_contract_table(), "regenerate: python -m siirl.execution.dag.contract_table"


@pytest.fixture
def examples():
    """The doc's Python examples, run as one module of the user's."""
    section = DOC[DOC.index("## Signatures"):DOC.index("## Batch keys of the built-in nodes")]
    module = types.ModuleType(MODULE)
    sys.modules[MODULE] = module
    for block in re.findall(r"```python\n(.*?)```", section, re.DOTALL):
        exec(compile(block, f"docs/extending.md ({MODULE})", "exec"), module.__dict__)  # noqa: S102
    yield module
    forget_entries_of({MODULE})
    sys.modules.pop(MODULE, None)


def test_the_signature_examples_run_as_written(examples):
    rewards = torch.tensor([[0.0, 1.0], [0.0, 0.0], [0.0, 2.0]])
    mask = torch.ones(3, 2)
    advantages, _ = compute_advantage("centred_score", token_level_rewards=rewards, response_mask=mask,
                                      index=["a", "a", "a"], config=typed_config().algorithm)
    assert torch.allclose(advantages[:, 0], torch.tensor([0.0, -1.0, 1.0]))

    log_prob = torch.zeros(3, 2, requires_grad=True)
    inputs = PolicyLossInputs(
        old_log_prob=torch.zeros(3, 2), log_prob=log_prob, advantages=advantages, response_mask=mask,
        config=typed_config().actor_rollout_ref.actor, reduce=lambda m, loss_agg_mode=None: masked_mean(m, mask),
    )
    loss, metrics = POLICY_LOSSES.get("plain_pg")(inputs)
    assert loss.item() == 0.0 and "ppo_kl" in metrics

    assert examples.compute_score("gsm8k", " 42", "42") == {"score": 1.0, "acc": True, "answer_length": 3}

    batch = TensorDict({"token_level_scores": torch.tensor([[0.0, 3.0], [0.0, -2.0]])}, batch_size=[2])
    assert declared_contract(examples.clip_scores).static.reads == ("token_level_scores",)
    out = examples.clip_scores(batch)
    assert out.batch["token_level_scores"][:, 1].tolist() == [1.0, -1.0] and out.metrics["clip_scores/max"] == 1.0
    assert "centred_score" in ADV_ESTIMATORS
