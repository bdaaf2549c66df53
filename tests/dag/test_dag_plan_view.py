"""Plan views: the text report, DOT output, the PNG step with and without Graphviz, show_plan."""

import logging
import stat

import pytest

from siirl.execution.dag import Pipeline, load_workflow_yaml
from siirl.execution.dag.builtin_pipelines import dapo_pipeline
from siirl.execution.scheduler import make_plan, plan_view, render_plan, show_plan, write_dot

FN = "dag_helpers:passthrough"


def _fake_dot(tmp_path, exit_code: int) -> str:
    """A stand-in ``dot`` that writes its ``-o`` target (or fails), so the PNG path is exercised here."""
    script = tmp_path / "bin" / "dot"
    script.parent.mkdir()
    script.write_text(
        "#!/bin/sh\n"
        f'[ "{exit_code}" = 0 ] || {{ echo "syntax error" >&2; exit {exit_code}; }}\n'
        'while [ "$#" -gt 0 ]; do if [ "$1" = "-o" ]; then printf PNG > "$2"; fi; shift; done\n'
    )
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return str(script)


def test_render_plan_shows_order_placements_and_tables():
    plan = make_plan(dapo_pipeline(), 1, 2, parallelism={"actor": {"tp": 2}})
    text = render_plan(plan)
    assert text.splitlines()[0] == "Plan for graph 'dapo': 1 node(s) x 2 device(s) = 2 rank(s)"
    assert (
        "Execution order: rollout_actor -> function_reward -> dynamic_sampling -> calculate_advantages"
        in text
    )
    assert "  all: ranks 0-1: rollout_actor, function_reward, dynamic_sampling" in text
    assert plan.to_table() in text and plan.groups_table() in text
    assert "actor      0-1    2 (tp)  1   [0,1]         [0] [1]" in text
    split = render_plan(make_plan(dapo_pipeline(), 1, 2, parallelism={"actor": {"sp": 2}}))
    assert "actor      0-1    2 (sp)  1   [0,1]         [0] [1]" in split and "dp0/1 sp1/2" in split


def test_dot_has_nodes_edges_and_clusters(tmp_path, monkeypatch):
    monkeypatch.setattr(plan_view.shutil, "which", lambda name: None)
    graph = (
        Pipeline('quote"d')
        .add_node("a", func=FN, node_type="MODEL_INFERENCE", node_role="ROLLOUT")
        .add_node("b", func=FN, deps=["a"], config={"placement_group": "left"})
        .add_node("c", func=FN, deps=["a"], config={"placement_group": "right"})
        .build()
    )
    paths = write_dot(graph, tmp_path / "sub" / "g.dot")
    assert paths == {"dot": tmp_path / "sub" / "g.dot"}
    dot = paths["dot"].read_text()
    assert dot.startswith('digraph "quote\\"d" {')
    assert '"a" -> "b";' in dot and '"a" -> "c";' in dot
    assert 'label="left"' in dot and 'label="right"' in dot and "subgraph cluster_1" in dot
    assert 'label="a\\nMODEL_INFERENCE / ROLLOUT", shape=box' in dot


def test_png_is_skipped_and_logged_without_graphviz(tmp_path, monkeypatch, caplog):
    monkeypatch.setattr(plan_view.shutil, "which", lambda name: None)
    with caplog.at_level(logging.INFO, logger=plan_view.__name__):
        paths = write_dot(dapo_pipeline(), tmp_path / "g.dot")
    assert "png" not in paths and "skipped the PNG" in caplog.text


def test_png_is_made_when_dot_is_installed(tmp_path, monkeypatch):
    fake = _fake_dot(tmp_path, 0)
    monkeypatch.setattr(plan_view.shutil, "which", lambda name: fake if name == "dot" else None)
    paths = write_dot(dapo_pipeline(), tmp_path / "g.dot")
    assert paths["png"] == tmp_path / "g.png" and paths["png"].read_text() == "PNG"


def test_failing_dot_is_logged_not_raised(tmp_path, monkeypatch, caplog):
    fake = _fake_dot(tmp_path, 3)
    monkeypatch.setattr(plan_view.shutil, "which", lambda name: fake)
    with caplog.at_level(logging.WARNING, logger=plan_view.__name__):
        paths = write_dot(dapo_pipeline(), tmp_path / "g.dot")
    assert "png" not in paths and "exit 3" in caplog.text and "syntax error" in caplog.text


@pytest.mark.parametrize("with_dot", [False, True])
def test_show_plan_writes_everything(tmp_path, monkeypatch, with_dot):
    fake = _fake_dot(tmp_path, 0) if with_dot else None
    monkeypatch.setattr(plan_view.shutil, "which", lambda name: fake)
    graph = dapo_pipeline()
    plan = make_plan(graph, 1, 2)
    out = tmp_path / "out"
    paths = show_plan(graph, plan, out)
    expected = {"text", "yaml", "dot", "png"} if with_dot else {"text", "yaml", "dot"}
    assert set(paths) == expected and all(path.parent == out and path.exists() for path in paths.values())
    assert paths["text"].read_text() == render_plan(plan) + "\n"
    assert load_workflow_yaml(paths["yaml"]) == graph
