"""Node functions for the hand-off tests: each adds its ``add`` to ``x`` and reports the result."""

from siirl.execution.dag import NodeOutput


def add(batch, config=None, *, node_config, **_):
    out = batch.clone()
    out["x"] = out["x"] + node_config["add"]
    return NodeOutput(out, metrics={f"x/{node_config['name']}": out["x"].sum().item()})
