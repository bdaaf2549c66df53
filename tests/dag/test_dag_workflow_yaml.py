"""Workflow YAML: shipped files match the built-ins, exact round trips, one-line load errors."""

from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from siirl.execution.dag import (
    DAGValidationError,
    NodeRole,
    NodeType,
    Pipeline,
    dump_workflow_yaml,
    load_workflow_yaml,
)
from siirl.execution.dag.builtin_pipelines import PIPELINES

WORKFLOWS = Path(__file__).resolve().parents[2] / "configs" / "workflows"
FN = "dag_helpers:passthrough"
REGENERATE = (
    'regenerate with: python -c "from siirl.execution.dag.builtin_pipelines import PIPELINES; '
    "from siirl.execution.dag import dump_workflow_yaml; "
    "[dump_workflow_yaml(b(), f'configs/workflows/{n}.yaml') for n, b in PIPELINES.items()]\""
)


@pytest.mark.parametrize("name", PIPELINES.names())
def test_shipped_workflow_file_equals_builtin(name):
    path = WORKFLOWS / f"{name}.yaml"
    builtin = PIPELINES.get(name)()
    assert load_workflow_yaml(path) == builtin
    assert path.read_text() == dump_workflow_yaml(builtin), REGENERATE


@pytest.mark.parametrize("name", PIPELINES.names())
def test_round_trip_is_exact(name, tmp_path):
    builtin = PIPELINES.get(name)()
    text = dump_workflow_yaml(builtin, tmp_path / "a.yaml")
    loaded = load_workflow_yaml(tmp_path / "a.yaml")
    assert loaded == builtin
    assert dump_workflow_yaml(loaded) == text
    assert load_workflow_yaml(tmp_path / "a.yaml") == loaded


def test_optional_fields_and_config_survive(tmp_path):
    graph = (
        Pipeline("extras", "with config")
        .add_node(
            "a",
            func=FN,
            node_type=NodeType.MODEL_INFERENCE,
            node_role=NodeRole.REWARD,
            only_forward_compute=True,
            config={"placement_group": "rm", "nested": {"k": [1, 2.5, "x"]}},
        )
        .add_node("b", func="dag_helpers:Stage.run", deps=["a"])
        .build()
    )
    path = tmp_path / "extras.yaml"
    text = dump_workflow_yaml(graph, path)
    assert "only_forward_compute: true" in text and "dependencies: [a]" in text
    assert load_workflow_yaml(path) == graph


def test_lowercase_enum_values_are_accepted(tmp_path):
    path = tmp_path / "lower.yaml"
    path.write_text(
        "pipeline_id: lower\nnodes:\n"
        f"  - {{node_id: a, node_type: model_train, node_role: actor, func: '{FN}'}}\n"
    )
    node = load_workflow_yaml(path).nodes["a"]
    assert (node.node_type, node.node_role, node.dependencies) == (NodeType.MODEL_TRAIN, NodeRole.ACTOR, [])


def _write(tmp_path, data) -> Path:
    path = tmp_path / "bad.yaml"
    path.write_text(data if isinstance(data, str) else yaml.safe_dump(data))
    return path


def _node(**overrides):
    entry = {"node_id": "a", "node_type": "COMPUTE", "node_role": "DEFAULT", "dependencies": [], "func": FN}
    entry.update(overrides)
    return {key: value for key, value in entry.items() if value is not None}


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (
            {"pipeline_id": "p", "nodes": [_node(node_type="MODEL_INFER")]},
            "node 'a' node_type is 'MODEL_INFER'",
        ),
        (
            {"pipeline_id": "p", "nodes": [_node(node_role="judge")]},
            "node 'a' node_role is 'judge'; expected one of",
        ),
        ({"pipeline_id": "p", "nodes": [_node(), _node()]}, "duplicate node_id 'a'"),
        ({"pipeline_id": "p", "nodes": [_node(dependencies=["z"])]}, "node 'a' depends on missing node 'z'"),
        (
            {
                "pipeline_id": "p",
                "nodes": [_node(dependencies=["b"]), _node(node_id="b", dependencies=["a"])],
            },
            "cycle: a -> b -> a",
        ),
        ({"pipeline_id": "p", "nodes": [_node(func="nowhere_xyz:f")]}, "cannot import module 'nowhere_xyz'"),
        ({"pipeline_id": "p", "nodes": [_node(func="dag_helpers:NOT_CALLABLE")]}, "not callable"),
        ({"pipeline_id": "p", "nodes": [_node(func=None)]}, "node 'a' has no 'func' and role DEFAULT has no built-in function"),
        ({"pipeline_id": "p", "nodes": [_node(fun=FN)]}, "node 'a' has unknown key 'fun'"),
        ({"pipeline_id": "p", "nodes": [_node(config=[1])]}, "node 'a' config must be a mapping"),
        (
            {"pipeline_id": "p", "nodes": [_node(only_forward_compute="yes")]},
            "only_forward_compute must be true/false",
        ),
        ({"pipeline_id": "p", "nodes": ["a"]}, "nodes[0] must be a mapping"),
        ({"pipeline_id": "p", "nodes": []}, "graph 'p' is empty"),
        ({"pipeline_id": "p"}, "graph 'p' is empty"),
        ({"pipeline_id": "p", "dag_id": "q", "nodes": [_node()]}, "sets both 'pipeline_id' and 'dag_id'"),
        ({"pipeline_id": "p", "nodes": [_node()], "stages": 1}, "workflow has unknown key 'stages'"),
        ({"pipeline_id": "p", "nodes": {"a": 1}}, "workflow 'nodes' must be a list"),
        ({"dag_id": "m", "actor_1_config": {}, "nodes": [_node()]}, "in the original siiRL's MARFT layout"),
        ({"dag_id": "m", "nodes": [_node(agent_group=1)]}, "pass it as dag.workflow_path (docs/agents.md)"),
        ("- just\n- a list\n", "a workflow must be a mapping"),
        ("pipeline_id: [unclosed\n", "invalid YAML"),
    ],
)
def test_load_errors_are_one_line_with_path(tmp_path, data, expected):
    path = _write(tmp_path, data)
    with pytest.raises(DAGValidationError) as excinfo:
        load_workflow_yaml(path)
    message = str(excinfo.value)
    assert expected in message and str(path) in message and "\n" not in message


def test_missing_file_is_a_one_line_error(tmp_path):
    with pytest.raises(DAGValidationError, match="workflow file .*absent.yaml: file not found"):
        load_workflow_yaml(tmp_path / "absent.yaml")


def test_unserialisable_config_is_named():
    graph = Pipeline("p").add_node("a", func=FN, config={"obj": object()}).build()
    with pytest.raises(DAGValidationError, match="node 'a' config is not plain YAML data"):
        dump_workflow_yaml(graph)


_ids = st.text(alphabet="abcdefghij_", min_size=1, max_size=6)
_values = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_ids, inner, max_size=3),
    max_leaves=6,
)


@settings(max_examples=40, deadline=None)
@given(
    st.lists(_ids, min_size=1, max_size=6, unique=True),
    st.data(),
)
def test_random_graphs_round_trip(tmp_path_factory, node_ids, data):
    pipeline = Pipeline("random", data.draw(st.text(max_size=10)))
    for i, node_id in enumerate(node_ids):
        deps = data.draw(st.lists(st.sampled_from(node_ids[:i]), unique=True)) if i else []
        pipeline.add_node(
            node_id,
            func=FN,
            deps=deps,
            node_type=data.draw(st.sampled_from(list(NodeType))),
            node_role=data.draw(st.sampled_from(list(NodeRole))),
            only_forward_compute=data.draw(st.booleans()),
            config=data.draw(st.dictionaries(_ids, _values, max_size=3)),
        )
    graph = pipeline.build()
    path = tmp_path_factory.mktemp("rt") / "g.yaml"
    text = dump_workflow_yaml(graph, path)
    loaded = load_workflow_yaml(path)
    assert loaded == graph and dump_workflow_yaml(loaded) == text


def test_pipeline_id_defaults_to_the_file_name_and_dag_id_is_an_alias(tmp_path):
    assert load_workflow_yaml(_write(tmp_path, {"nodes": [_node()]})).graph_id == "bad"
    path = _write(tmp_path, {"dag_id": "seed_dag", "nodes": [_node()]})
    assert load_workflow_yaml(path).graph_id == "seed_dag"


def test_node_without_func_runs_the_builtin_function_of_its_role(tmp_path):
    nodes = [
        {"node_id": "old", "node_type": "MODEL_TRAIN", "node_role": "ACTOR", "only_forward_compute": True},
        {"node_id": "train", "node_type": "MODEL_TRAIN", "node_role": "ACTOR", "dependencies": ["old"]},
        {"node_id": "ref", "node_type": "MODEL_TRAIN", "node_role": "REFERENCE", "dependencies": ["train"]},
    ]
    graph = load_workflow_yaml(_write(tmp_path, {"pipeline_id": "p", "nodes": nodes}))
    refs = {node_id: node.executable_ref.split(":")[1] for node_id, node in graph.nodes.items()}
    assert refs == {"old": "compute_old_log_prob", "train": "train_actor", "ref": "compute_ref_log_prob"}


def test_contract_keys_round_trip(tmp_path):
    node = _node(reads=["responses"], writes=["my_key"], roles=["actor"])
    graph = load_workflow_yaml(_write(tmp_path, {"pipeline_id": "p", "nodes": [node]}))
    contract = graph.nodes["a"].contract
    assert (contract.reads, contract.writes, contract.roles) == (("responses",), ("my_key",), ("actor",))
    assert load_workflow_yaml(_write(tmp_path, yaml.safe_load(dump_workflow_yaml(graph)))) == graph
