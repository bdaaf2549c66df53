"""Two Ray nodes on one machine: one buffer per node, samples cross nodes producer -> consumer; and a DAG
worker sizes its threads from its node's CPUs, not the host's (the nodes have 3 and 1, the host another count)."""

from __future__ import annotations

import pytest
import ray
from dc_ray_workers import Worker, entries_once_settled
from dc_testutils import RAY_RUNTIME_ENV
from ray.cluster_utils import Cluster

from siirl.dag_worker.worker import ray_node_cpus
from siirl.data_coordinator import (
    BUFFER_NAME_PREFIX,
    buffer_name,
    create_data_buffers,
    find_data_buffers,
    shutdown_data_buffers,
)
from tests.ray_testutils import OWN_RAY_GROUP, own_ray

pytestmark = [pytest.mark.slow, OWN_RAY_GROUP]

STORE = 100 * 1024**2
#: Neither is this host's core count (2 on the development host): a probe reading the host would differ.
NODE_A_CPUS, NODE_B_CPUS = 3, 1


@pytest.fixture(scope="module")
def two_nodes():
    with own_ray():
        yield from _two_nodes()


def _two_nodes():
    cluster = Cluster(
        initialize_head=True,
        head_node_args={"num_cpus": NODE_A_CPUS, "resources": {"node_a": 3}, "object_store_memory": STORE},
    )
    cluster.add_node(num_cpus=NODE_B_CPUS, resources={"node_b": 3}, object_store_memory=STORE)
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, runtime_env=RAY_RUNTIME_ENV)
    buffers = create_data_buffers()
    on_a = [ray.remote(num_cpus=1, resources={"node_a": 1})(Worker).remote() for _ in range(2)]
    on_b = [ray.remote(num_cpus=1, resources={"node_b": 1})(Worker).remote()]
    yield buffers, on_a, on_b
    shutdown_data_buffers()
    ray.shutdown()
    cluster.shutdown()


def test_exactly_one_buffer_per_node(two_nodes):
    buffers, on_a, on_b = two_nodes
    node_a, node_b = ray.get(on_a[0].node_id.remote()), ray.get(on_b[0].node_id.remote())
    assert node_a != node_b and set(buffers) == {node_a, node_b}
    assert {node: ray.get(b.node_id.remote()) for node, b in buffers.items()} == {n: n for n in buffers}
    assert set(create_data_buffers()) == set(buffers)  # creating again reuses them
    names = [a["name"] for a in ray.util.list_named_actors(all_namespaces=True)]
    assert sorted(n for n in names if n.startswith(BUFFER_NAME_PREFIX)) == sorted(buffer_name(n) for n in buffers)
    assert set(find_data_buffers()) == set(buffers)


def test_consumer_on_node_b_receives_samples_produced_on_node_a(two_nodes):
    buffers, on_a, on_b = two_nodes
    producer_nodes = ray.get([on_a[p].produce.remote(1, "rollout", p, 2, 1, 1, 4) for p in range(2)])
    node_a = producer_nodes[0]
    published = {node: {"1/rollout": [0, 1]} for node in buffers}
    assert entries_once_settled(buffers, published) == published  # metadata is everywhere
    stats = {node: ray.get(b.stats.remote()) for node, b in buffers.items()}
    assert stats[node_a]["pieces"] == {"1/rollout": [0, 1]}  # the refs stay on the producers' node
    assert all(not s["pieces"] for node, s in stats.items() if node != node_a)

    got = ray.get(on_b[0].consume.remote(1, "rollout", 0, 1, 2))
    assert got["node_id"] != node_a and set(producer_nodes) == {node_a}
    assert got["x"] == [0.0, 1.0, 2.0, 3.0, 1000.0, 1001.0, 1002.0, 1003.0]
    assert entries_once_settled(buffers, {node: {} for node in buffers}) == {node: {} for node in buffers}


def test_producers_on_both_nodes_feed_consumers_on_both_nodes(two_nodes):
    buffers, on_a, on_b = two_nodes
    puts = [
        on_a[0].produce.remote(2, "reward", 0, 2, 2, 2, 6, 2),
        on_b[0].produce.remote(2, "reward", 1, 2, 2, 2, 6, 2),
    ]
    # on_b[0] produces and then consumes, as a DAG worker does.
    gets = [on_a[1].consume.remote(2, "reward", 0, 2, 2), on_b[0].consume.remote(2, "reward", 1, 2, 2)]
    ray.get(puts)
    parts = ray.get(gets)
    assert sorted(x for p in parts for x in p["x"]) == sorted(
        [float(i) for i in range(6)] + [1000.0 + i for i in range(6)]
    )
    assert not set(parts[0]["uid"]) & set(parts[1]["uid"])
    assert parts[0]["node_id"] != parts[1]["node_id"]
    assert entries_once_settled(buffers, {node: {} for node in buffers}) == {node: {} for node in buffers}


def test_each_node_reports_the_cpus_ray_gave_it(two_nodes):
    probe = ray.remote(num_cpus=0)(ray_node_cpus)  # the workers above hold the nodes' CPUs; a spare node_a/b unit each
    on_a = probe.options(resources={"node_a": 0.01}).remote()
    on_b = probe.options(resources={"node_b": 0.01}).remote()
    assert ray.get([on_a, on_b], timeout=120) == [NODE_A_CPUS, NODE_B_CPUS]
    assert ray_node_cpus() == NODE_A_CPUS  # the driver runs on the head node (node_a)
