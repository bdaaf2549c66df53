"""The driver's Ray requests for every registered backend pass Ray's own validation (no hardware needed)."""

import pytest
import ray
from ray._common.ray_option_utils import validate_actor_options
from ray._common.utils import resources_from_ray_options
from ray.util.placement_group import PlacementGroup, _valid_resource_shape, validate_placement_group

from siirl.dag_worker.worker import DAGWorker
from siirl.device import backend_class, backend_names
from siirl.execution.scheduler.ray_request import (
    PLACEMENT_STRATEGY,
    placement_bundles,
    worker_actor_options,
    worker_name,
)

#: How Ray's accelerator managers name each family's resource (ray.io "Accelerator Support").
RAY_RESOURCE_NAMES = {"cpu": None, "cuda": "GPU", "npu": "NPU"}


@pytest.mark.parametrize("name", backend_names())
def test_requests_pass_ray_validation(name):
    backend = backend_class(name)()  # built without its hardware: only the request shape is asked
    bundles = placement_bundles(backend, world_size=3)
    validate_placement_group(bundles, strategy=PLACEMENT_STRATEGY)
    options = worker_actor_options(backend, PlacementGroup.empty(), rank=2)
    validate_actor_options(options, in_options=True)
    ray.remote(DAGWorker).options(**options)  # the driver's exact call, up to .remote()
    assert options["name"] == worker_name(2)
    assert options["scheduling_strategy"].placement_group_bundle_index == 2
    demand = resources_from_ray_options({k: v for k, v in options.items() if k != "scheduling_strategy"})
    assert _valid_resource_shape(demand, bundles), f"{demand} does not fit the bundle {bundles[0]}"
    assert demand == bundles[0], "each worker takes exactly its bundle"


@pytest.mark.parametrize("name", backend_names())
def test_accelerator_named_as_ray_names_it(name):
    backend = backend_class(name)()
    if name in RAY_RESOURCE_NAMES:
        assert backend.ray_resource == RAY_RESOURCE_NAMES[name]
    if backend.ray_resource is not None:
        from ray._private import accelerators

        assert backend.ray_resource in accelerators.get_all_accelerator_resource_names()
        assert backend.ray_bundle() == {"CPU": 1.0, backend.ray_resource: 1.0}


def test_cuda_asks_with_num_gpus_npu_with_its_resource():
    cuda, npu, cpu = backend_class("cuda")(), backend_class("npu")(), backend_class("cpu")()
    assert cuda.ray_actor_resources() == {"num_cpus": 1, "num_gpus": 1}
    assert npu.ray_actor_resources() == {"num_cpus": 1, "resources": {"NPU": 1}}
    assert cpu.ray_actor_resources() == {"num_cpus": 1}


def test_ray_refuses_gpu_in_resources():
    """The shape the driver once sent for CUDA: Ray's validation rejects it, so the test above can fail."""
    with pytest.raises(ValueError, match="num_gpus"):
        validate_actor_options({"num_cpus": 1, "resources": {"GPU": 1}}, in_options=True)


def test_bundles_need_a_worker():
    with pytest.raises(ValueError, match="world_size"):
        placement_bundles(backend_class("cpu")(), 0)
