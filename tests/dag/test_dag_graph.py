"""Node, TaskGraph and Pipeline: structure, order, lazy resolution and one-line build errors."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from siirl.errors import SiirlUserError
from siirl.execution.dag import DAGValidationError, Node, NodeOutput, NodeRole, NodeType, Pipeline

FN = "dag_helpers:passthrough"


def _one_line_error(excinfo: pytest.ExceptionInfo) -> str:
    message = str(excinfo.value)
    assert "\n" not in message
    assert isinstance(excinfo.value, ValueError) and isinstance(excinfo.value, SiirlUserError)
    return message


def test_pipeline_builds_adjacency_and_order():
    graph = (
        Pipeline("diamond", "fan out and in")
        .add_node("src", func=FN, node_type=NodeType.DATA_LOAD)
        .add_node("left", func=FN, deps=["src"], node_type="model_inference", node_role="ACTOR")
        .add_node("right", func=FN, deps=["src"])
        .add_node("sink", func=FN, deps=["right", "left"], node_type=NodeType.MODEL_TRAIN)
        .build()
    )
    assert graph.graph_id == "diamond" and graph.description == "fan out and in"
    assert graph.adj == {"src": ["left", "right"], "left": ["sink"], "right": ["sink"], "sink": []}
    assert graph.rev_adj == {"src": [], "left": ["src"], "right": ["src"], "sink": ["right", "left"]}
    assert graph.get_execution_order() == ["src", "left", "right", "sink"]
    left = graph.nodes["left"]
    assert left.node_type is NodeType.MODEL_INFERENCE and left.node_role is NodeRole.ACTOR
    assert graph.nodes["src"].node_role is NodeRole.DEFAULT


def test_order_breaks_ties_by_insertion_not_by_name():
    graph = (
        Pipeline("ties")
        .add_node("z", func=FN)
        .add_node("a", func=FN)
        .add_node("m", func=FN, deps=["a"])
        .build()
    )
    assert graph.get_execution_order() == ["z", "a", "m"]


def test_executable_is_resolved_lazily_and_cached():
    node = Node("n", NodeType.COMPUTE, NodeRole.DEFAULT, "no_such_module_xyz:f")
    with pytest.raises(DAGValidationError, match="no_such_module_xyz"):
        _ = node.executable
    good = Node("g", NodeType.COMPUTE, NodeRole.DEFAULT, FN)
    assert good._executable is None
    out = good.executable("batch")
    assert isinstance(out, NodeOutput) and out.batch == "batch" and out.metrics == {} and out.info == {}
    assert good._executable is good.executable


def test_instance_method_reference_is_bound_so_the_batch_is_not_self():
    graph = Pipeline("cls").add_node("stage", func="dag_helpers:Stage.run").build()
    import dag_helpers

    out = graph.nodes["stage"].executable("batch")
    assert out.batch == "batch" and isinstance(out.info["stage"], dag_helpers.Stage)
    again = graph.copy().nodes["stage"].executable("other").info["stage"]
    assert again is out.info["stage"]  # one instance per class and process
    assert graph.nodes["stage"].executable_ref == "dag_helpers:Stage.run"


def test_callable_func_is_stored_as_its_reference():
    import dag_helpers

    graph = Pipeline("c").add_node("n", func=dag_helpers.passthrough).build()
    assert graph.nodes["n"].executable_ref == FN


def test_lambda_func_is_rejected():
    with pytest.raises(DAGValidationError, match="lambda or local function") as excinfo:
        Pipeline("c").add_node("n", func=lambda batch: batch)
    _one_line_error(excinfo)


def test_node_config_is_copied_and_shown_in_equality():
    config = {"coef": [1, 2]}
    graph = Pipeline("c").add_node("n", func=FN, config=config).build()
    config["coef"].append(3)
    assert graph.nodes["n"].config == {"coef": [1, 2]}
    assert graph != Pipeline("c").add_node("n", func=FN).build()
    assert graph == Pipeline("c").add_node("n", func=FN, config={"coef": [1, 2]}).build()


def test_copy_and_subgraph_are_independent():
    graph = Pipeline("g").add_node("a", func=FN).add_node("b", func=FN, deps=["a"], config={"k": 1}).build()
    clone = graph.copy("g2")
    clone.nodes["b"].config["k"] = 2
    assert graph.nodes["b"].config == {"k": 1} and clone.graph_id == "g2"
    sub = graph.subgraph(["b"], "only_b")
    assert list(sub.nodes) == ["b"] and sub.nodes["b"].dependencies == []
    assert graph.nodes["b"].dependencies == ["a"]


@pytest.mark.parametrize(
    ("build", "expected"),
    [
        (
            lambda: Pipeline("p").add_node("a", func=FN).add_node("a", func=FN).build(),
            "duplicate node_id 'a'",
        ),
        (
            lambda: Pipeline("p").add_node("a", func=FN).add_node("b", func=FN, deps=["ghost"]).build(),
            "node 'b' depends on missing node 'ghost'",
        ),
        (
            lambda: (
                Pipeline("p")
                .add_node("a", func=FN, deps=["c"])
                .add_node("b", func=FN, deps=["a"])
                .add_node("c", func=FN, deps=["b"])
                .add_node("d", func=FN, deps=["c"])
                .build()
            ),
            "has a cycle: a -> b -> c -> a",
        ),
        (lambda: Pipeline("p").add_node("a", func=FN, deps=["a"]).build(), "has a cycle: a -> a"),
        (
            lambda: Pipeline("p").add_node("a", func="no_such_module_xyz:fn").build(),
            "node 'a' func 'no_such_module_xyz:fn': cannot import module 'no_such_module_xyz'",
        ),
        (
            lambda: Pipeline("p").add_node("a", func="dag_broken_module:f").build(),
            "cannot import module 'dag_broken_module' (RuntimeError: boom at import)",
        ),
        (
            lambda: Pipeline("p").add_node("a", func="dag_helpers:missing").build(),
            "node 'a' func 'dag_helpers:missing': module dag_helpers has no attribute 'missing'",
        ),
        (
            lambda: Pipeline("p").add_node("a", func="dag_helpers:Stage.nope").build(),
            "dag_helpers:Stage has no attribute 'nope'",
        ),
        (
            lambda: Pipeline("p").add_node("a", func="dag_helpers:NOT_CALLABLE").build(),
            "resolves to a int, which is not callable",
        ),
        (
            lambda: Pipeline("p").add_node("a", func="dag_helpers.passthrough").build(),
            "must look like 'module:function'",
        ),
        (
            lambda: Pipeline("p").add_node("a", func="dag_helpers:").build(),
            "must look like 'module:function'",
        ),
        (
            lambda: Pipeline("p").add_node("a", func=FN, node_type="GPU_WORK").build(),
            "node_type is 'GPU_WORK'",
        ),
        (lambda: Pipeline("p").add_node("a", func=FN, node_role="judge").build(), "node_role is 'judge'"),
        (lambda: Pipeline("p").add_node("a", func=FN, deps="b").build(), "dependencies must be a list"),
        (
            lambda: Pipeline("p").add_node("a", func=FN).add_node("b", func=FN, deps=["a", "a"]).build(),
            "more than once",
        ),
        (lambda: Pipeline("p").add_node("", func=FN).build(), "node_id must be a non-empty string"),
        (lambda: Pipeline("p").build(), "graph 'p' is empty"),
    ],
)
def test_build_errors_are_one_line_and_name_the_culprit(build, expected):
    with pytest.raises(DAGValidationError) as excinfo:
        build()
    assert expected in _one_line_error(excinfo)


def test_structure_only_validation_skips_imports():
    graph = Pipeline("p").add_node("a", func="no_such_module_xyz:fn").build(resolve_executables=False)
    assert graph.get_execution_order() == ["a"]


def test_edits_after_build_are_seen_by_the_order():
    graph = Pipeline("p").add_node("a", func=FN).add_node("b", func=FN).build()
    graph.nodes["a"].dependencies.append("b")
    assert graph.get_execution_order() == ["b", "a"]
    graph.add_node(Node("c", "COMPUTE", "DEFAULT", FN, ["a"]))
    assert graph.get_execution_order() == ["b", "a", "c"]
    with pytest.raises(DAGValidationError, match="duplicate node_id 'c'"):
        graph.add_node(Node("c", "COMPUTE", "DEFAULT", FN))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.integers(min_value=0, max_value=30), max_size=4), min_size=1, max_size=12))
def test_random_dags_order_respects_every_dependency(parent_picks):
    pipeline = Pipeline("random")
    for i, picks in enumerate(parent_picks):
        deps = sorted({f"n{p % i}" for p in picks}) if i else []
        pipeline.add_node(f"n{i}", func=FN, deps=deps)
    graph = pipeline.build()
    order = graph.get_execution_order()
    position = {node_id: k for k, node_id in enumerate(order)}
    assert sorted(order) == sorted(graph.nodes)
    for node in graph:
        assert all(position[dep] < position[node.node_id] for dep in node.dependencies)
    assert order == graph.copy().get_execution_order()
