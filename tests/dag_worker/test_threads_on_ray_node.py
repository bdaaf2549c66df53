"""A DAG worker counts the job's workers on its Ray node from its placement group, so the planned rollout and
trainer nodes of ``separate_async`` on one host split that host's cores instead of each taking all of them."""

import ray
from ray.util.placement_group import placement_group, remove_placement_group
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

from siirl.dag_worker.worker import job_workers_on_ray_node


def test_workers_of_one_placement_group_on_one_node_are_counted_together(ray_session):
    group = placement_group([{"CPU": 0.01}, {"CPU": 0.01}], strategy="PACK")
    ray.get(group.ready())
    try:
        probe = ray.remote(num_cpus=0.01)(job_workers_on_ray_node)
        strategy = PlacementGroupSchedulingStrategy(placement_group=group, placement_group_bundle_index=1)
        assert ray.get(probe.options(scheduling_strategy=strategy).remote()) == 2
        assert ray.get(probe.remote()) is None  # outside a placement group: the planned node decides
    finally:
        remove_placement_group(group)
