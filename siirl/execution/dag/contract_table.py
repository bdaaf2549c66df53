"""The batch keys each built-in node reads and writes, as a Markdown table generated from the node contracts
(docs/extending.md holds a copy; a test keeps the two equal). Regenerate it with
``python -m siirl.execution.dag.contract_table``.

Keys shown are those of the default config; a node whose contract also depends on the config (KL terms, the
estimator's needs, images, environments) is marked, and ``--plan`` prints every node's contract for a run.
"""

from __future__ import annotations

from siirl.execution.dag.builtin_pipelines import STEPS
from siirl.execution.dag.contract import declared_contract
from siirl.execution.dag.contract_check import DATALOADER_KEYS
from siirl.execution.dag.node import resolve_node_callable
from siirl.params.root import SiirlConfig


def _keys(keys: tuple[str, ...]) -> str:
    return ", ".join(f"`{key}`" for key in keys) or "-"


def builtin_contract_table() -> str:
    """What the dataloader writes, then one row per built-in step: node id, function, reads, writes, models,
    whether the config changes them."""
    cfg = SiirlConfig()
    rows = [
        "| node | function | reads | writes | models | more with the config |",
        "|---|---|---|---|---|---|",
        f"| (dataloader) | - | - | {_keys(DATALOADER_KEYS)} | - | yes |",
    ]
    for node_id, step in STEPS.items():
        declared = declared_contract(resolve_node_callable(step.func, f"node {node_id!r}"))
        if declared is None:
            raise ValueError(f"built-in node {node_id!r} ({step.func}) declares no contract")
        contract = declared.resolve(cfg)
        varies = "yes" if declared.when is not None else "no"
        rows.append(
            f"| `{node_id}` | `{step.func}` | {_keys(contract.reads)} | {_keys(contract.writes)} | "
            f"{_keys(contract.roles)} | {varies} |"
        )
    return "\n".join(rows)


if __name__ == "__main__":
    print(builtin_contract_table())
