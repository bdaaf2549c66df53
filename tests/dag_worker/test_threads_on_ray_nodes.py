"""Two Ray nodes of one CPU each on this host: a DAG worker sizes its threads from its node, not the host."""

import pytest
import ray
from ray.cluster_utils import Cluster

from siirl.dag_worker.worker import ray_node_cpus
from tests.ray_testutils import OWN_RAY_GROUP, own_ray

pytestmark = [pytest.mark.slow, OWN_RAY_GROUP]


def test_each_node_reports_the_cpus_ray_gave_it():
    with own_ray():
        _each_node_reports_the_cpus_ray_gave_it()


def _each_node_reports_the_cpus_ray_gave_it():
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "resources": {"head": 1}})
    cluster.add_node(num_cpus=1, resources={"second": 1})
    cluster.wait_for_nodes()
    ray.init(address=cluster.address)
    try:
        probe = ray.remote(num_cpus=1)(ray_node_cpus)
        on_second = probe.options(resources={"second": 1}).remote()
        on_head = probe.options(resources={"head": 1}).remote()
        assert ray.get([on_head, on_second], timeout=120) == [1, 1]
    finally:
        ray.shutdown()
        cluster.shutdown()
    assert ray_node_cpus() is None  # outside Ray
