"""The custom node of this example: discourage long answers by lowering the reward of long responses."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tensordict import TensorDictBase

from siirl.execution.dag import NodeOutput
from siirl.execution.dag.contract import node_contract
from siirl.params import SiirlConfig


@dataclass
class LengthPenaltyConfig:
    """The node's own config section (``config={"coef": ...}`` in the pipeline)."""

    #: Penalty of a response as long as ``max_response_length``; shorter ones pay proportionally less.
    coef: float = 0.1


@node_contract(
    reads=("response_mask", "token_level_scores"), writes=("token_level_scores",), config=LengthPenaltyConfig
)
def length_penalty(
    batch: TensorDictBase,
    config: SiirlConfig | None = None,
    *,
    node_config: LengthPenaltyConfig | None = None,
    **kwargs: Any,
) -> NodeOutput:
    """Subtract ``coef * length / max_length`` from each response's score, on its last response token.

    Placing the penalty where the outcome reward sits keeps ``token_level_scores`` summing to the
    sequence score, so every advantage estimator sees the penalised reward unchanged in form.
    ``config`` is the run's typed root config (``SiirlConfig``); the node's own section arrives typed as
    ``node_config``.
    """
    coef = (node_config or LengthPenaltyConfig()).coef
    mask = batch["response_mask"].to(batch["token_level_scores"].dtype)
    lengths = mask.sum(dim=-1)
    penalty = coef * lengths / mask.shape[-1]
    last = (lengths.long() - 1).clamp(min=0).unsqueeze(-1)
    scores = batch["token_level_scores"].clone()
    scores.scatter_add_(-1, last, -(penalty * (lengths > 0)).unsqueeze(-1))
    batch["token_level_scores"] = scores
    metrics = {
        "length_penalty/mean_response_length": lengths.mean().item(),
        "length_penalty/mean_penalty": penalty.mean().item(),
        "length_penalty/coef": coef,
    }
    return NodeOutput(batch, metrics=metrics)


class ResponseStats:
    """Node functions as instance methods: ``func="examples.custom_pipeline.nodes:ResponseStats.log"``.

    The worker creates one instance per process and binds the method to it, so state (here a step
    counter) lives across steps.
    """

    def __init__(self) -> None:
        self.calls = 0

    @node_contract(reads=("response_mask",))
    def log(self, batch: TensorDictBase, config: SiirlConfig | None = None, **kwargs: Any) -> NodeOutput:
        self.calls += 1
        lengths = batch["response_mask"].sum(dim=-1).float()
        return NodeOutput(batch, metrics={"response_stats/calls": self.calls, "response_stats/max": lengths.max().item()})
