"""Custom node functions with and without contracts, for the plan-time contract tests."""

from dataclasses import dataclass

from siirl.execution.dag import NodeOutput
from siirl.execution.dag.contract import node_contract


@node_contract(reads=("responses",), writes=("bonus",))
def adds_bonus(batch, config=None, **kwargs):
    return NodeOutput(batch)


@node_contract(reads=("bonus_typo",))
def reads_typo(batch, config=None, **kwargs):
    return NodeOutput(batch)


@node_contract(roles=("critic",))
def needs_critic(batch, config=None, **kwargs):
    return NodeOutput(batch)


def undeclared(batch, config=None, **kwargs):
    return NodeOutput(batch)


@dataclass
class ScaleConfig:
    factor: float = 1.0


@node_contract(config=ScaleConfig)
def scaled(batch, config=None, *, node_config: ScaleConfig, **kwargs):
    return NodeOutput(batch, metrics={"factor": node_config.factor})
