"""Every code snippet of siiRL's published documentation runs unchanged (fixtures in tests/fixtures/seeds)."""

from __future__ import annotations

import sys
import textwrap
import types
from pathlib import Path

import pytest

from siirl.execution.dag import DAGValidationError, NodeOutput, NodeType
from siirl.execution.dag.node import Node
from siirl.execution.dag.workflow_yaml import load_workflow_yaml
from siirl.execution.scheduler.planner import plan_from_config
from siirl.main_dag import EXIT_USER_ERROR, main

SEEDS = Path(__file__).resolve().parents[1] / "fixtures" / "seeds"


def snippet(name: str) -> str:
    return (SEEDS / name).read_text(encoding="utf-8")




@pytest.fixture
def my_module(tmp_path, monkeypatch):
    """``my_module`` as a user writes it: the seed's custom pipeline and node function, verbatim."""
    prelude = "process = lambda batch: batch\nvalue = 1.0\n"
    source = "\n\n".join([prelude, snippet("custom_pipeline.pysnippet"), snippet("custom_node_function.pysnippet")])
    (tmp_path / "my_module.py").write_text(source)
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("my_module", None)
    yield __import__("my_module")
    sys.modules.pop("my_module", None)


def test_basic_usage_builds_or_names_its_placeholder(monkeypatch):
    module = types.ModuleType("module")
    module.function = module.another_function = lambda batch, config=None, **kwargs: NodeOutput(batch)
    monkeypatch.setitem(sys.modules, "module", module)
    with pytest.raises(DAGValidationError, match="node 'node_id' depends on missing node 'dependency_node_ids'"):
        exec(snippet("pipeline_basic_usage.pysnippet"), {})  # noqa: S102 - the seed's own code


def test_custom_pipeline_and_node_function_run(my_module):
    graph = my_module.my_custom_pipeline()
    assert graph.get_execution_order() == ["rollout_actor", "my_custom_node"]
    assert graph.nodes["rollout_actor"].executable.__name__ == "generate"
    out = graph.nodes["my_custom_node"].executable("batch", config=None)
    assert isinstance(out, NodeOutput) and out.batch == "batch" and out.metrics == {"metric_name": 1.0}
    plan_from_config(graph, None)  # default config; contracts hold: generate reads only dataloader keys


def test_custom_pipeline_from_the_command_line(my_module, capsys, tmp_path):
    code = main(["--plan", "device=cpu", "dag.custom_pipeline_fn=my_module:my_custom_pipeline",
                 f"trainer.output_dir={tmp_path}"])
    assert code == 0, capsys.readouterr().err
    assert "rollout_actor -> my_custom_node" in capsys.readouterr().out


def test_dagworker_loop_walks_get_nodes_in_order(my_module):
    calls = []

    class Worker:
        taskgraph = my_module.my_custom_pipeline()

        def _gather_node_inputs(self, node):
            return {"deps": node.dependencies}

        def _execute_model_inference(self, node, **inputs):
            calls.append(("inference", node.node_id, inputs["deps"]))

        def _execute_compute_node(self, node, **inputs):
            calls.append(("compute", node.node_id, inputs["deps"]))

        def _execute_model_train(self, node, **inputs):
            calls.append(("train", node.node_id, inputs["deps"]))

        def _update_internal_data_cache(self, node_id, output):
            pass

    body = "def loop(self):\n" + textwrap.indent(snippet("dagworker_loop.pysnippet"), "    ")
    namespace = {"NodeType": NodeType}
    exec(body, namespace)  # noqa: S102 - the seed's own code
    namespace["loop"](Worker())
    assert calls == [("inference", "rollout_actor", []), ("compute", "my_custom_node", ["rollout_actor"])]


def test_node_accepts_an_executable(my_module):
    node = Node(node_id="n", node_type=NodeType.COMPUTE, node_role="DEFAULT", dependencies=[],
                executable=my_module.my_function)
    assert node.executable_ref == "my_module:my_function" and node.executable is my_module.my_function


def test_workflow_yaml_snippet_loads_and_plans(tmp_path):
    graph = load_workflow_yaml(SEEDS / "workflow_grpo.yaml")
    assert graph.get_execution_order() == ["rollout_actor", "function_reward"]
    assert graph.nodes["function_reward"].executable.__name__ == "compute_reward"
    plan_from_config(graph, None)
    full = load_workflow_yaml(SEEDS / "workflow_grpo_full.yaml")
    assert full.graph_id == "grpo_training_pipeline"
    plan_from_config(full, None)


@pytest.mark.parametrize("line", [ln for ln in snippet("commands.txt").splitlines() if ln and ln[0] != "#"])
def test_documented_commands_plan(line, capsys, tmp_path):
    assert main(["--plan", "device=cpu", *line.split(), f"trainer.output_dir={tmp_path}"]) == 0


def test_embodied_command_plans_on_the_builtin_environment(capsys, tmp_path):
    assert main(["--plan", "device=cpu", "algorithm.workflow_type=EMBODIED", f"trainer.output_dir={tmp_path}"]) == 0
    assert "rollout_actor -> embodied_sampling -> function_reward" in capsys.readouterr().out
    assert main(["--plan", "device=cpu", "algorithm.workflow_type=EMBODIED", "env.name=nope"]) == EXIT_USER_ERROR
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "unknown environment 'nope'" in err


def test_configuration_block_loads_as_a_config_file():
    from siirl.config_checks import load_config

    # device=cuda: the block names vLLM, which device=cpu would replace with hf
    cfg = load_config(["device=cuda"], config_path=str(SEEDS), config_name="config_groups")
    assert list(cfg.data.train_files) == ["/path/to/train.parquet"]
    assert cfg.actor_rollout_ref.actor.optim.lr == pytest.approx(1e-6)
    assert cfg.trainer.n_gpus_per_node == 8 and cfg.actor_rollout_ref.rollout.name == "vllm"
    assert not cfg.dag.custom_pipeline_fn
