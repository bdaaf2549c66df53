"""GRPO plus a length penalty, built with the public Pipeline API.

Run it with ``python -m siirl.main_dag dag.custom_pipeline_fn=examples.custom_pipeline.pipeline:build``
from the repository root. ``length_penalty_pipeline(coef)`` builds the same graph with another penalty.
"""


from siirl.execution.dag import NodeRole, NodeType, Pipeline, TaskGraph

NODES = "siirl.dag_worker.builtin_nodes"


def build() -> TaskGraph:
    """The example's graph with a penalty coefficient of 0.5."""
    return length_penalty_pipeline(coef=0.5)


def length_penalty_pipeline(coef: float) -> TaskGraph:
    """rollout -> reward -> stats -> length penalty -> advantage -> old / ref log-probs -> actor update."""
    return (
        Pipeline("grpo_length_penalty", "GRPO with a response-length penalty on the reward")
        .add_node(
            "rollout_actor",
            func=f"{NODES}:generate",
            node_type=NodeType.MODEL_INFERENCE,
            node_role=NodeRole.ROLLOUT,
        )
        .add_node(
            "function_reward",
            func=f"{NODES}:compute_reward",
            deps=["rollout_actor"],
            node_type=NodeType.COMPUTE,
            node_role=NodeRole.REWARD,
        )
        .add_node(
            "response_stats",
            func="examples.custom_pipeline.nodes:ResponseStats.log",
            deps=["function_reward"],
        )
        .add_node(
            "length_penalty",
            func="examples.custom_pipeline.nodes:length_penalty",
            deps=["response_stats"],
            node_type=NodeType.COMPUTE,
            node_role=NodeRole.REWARD,
            config={"coef": coef},
        )
        .add_node(
            "calculate_advantages",
            func=f"{NODES}:compute_advantage",
            deps=["length_penalty"],
            node_type=NodeType.COMPUTE,
            node_role=NodeRole.ADVANTAGE,
        )
        .add_node(
            "actor_old_log_prob",
            func=f"{NODES}:compute_old_log_prob",
            deps=["calculate_advantages"],
            node_type=NodeType.MODEL_INFERENCE,
            node_role=NodeRole.ACTOR,
            only_forward_compute=True,
        )
        .add_node(
            "reference_log_prob",
            func=f"{NODES}:compute_ref_log_prob",
            deps=["actor_old_log_prob"],
            node_type=NodeType.MODEL_INFERENCE,
            node_role=NodeRole.REFERENCE,
        )
        .add_node(
            "actor_train",
            func=f"{NODES}:train_actor",
            deps=["reference_log_prob"],
            node_type=NodeType.MODEL_TRAIN,
            node_role=NodeRole.ACTOR,
        )
        .build()
    )
