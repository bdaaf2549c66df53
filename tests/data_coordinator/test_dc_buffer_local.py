"""Per-node buffers on a single local Ray node: producers put, consumers of another dp layout get.

Slow because four worker processes each import torch and tensordict on a 2-core runner.
"""

from __future__ import annotations

import numpy as np
import pytest
import ray
from dc_ray_workers import Worker, entries_once_settled, make_shard
from dc_testutils import RAY_RUNTIME_ENV

from siirl.data_coordinator import (
    BUFFER_NAME_PREFIX,
    DataCoordinatorTimeout,
    assign_samples,
    buffer_name,
    create_data_buffers,
    describe_shard,
    shutdown_data_buffers,
)
from tests.ray_testutils import OWN_RAY_GROUP, own_ray

pytestmark = [pytest.mark.slow, OWN_RAY_GROUP]


@pytest.fixture(scope="module")
def cluster():
    with own_ray():
        yield from _cluster()


def _cluster():
    ray.init(
        address="local",  # a Ray of our own, even when another one runs on this host
        num_cpus=4,
        object_store_memory=200 * 1024**2,
        include_dashboard=False,
        runtime_env=RAY_RUNTIME_ENV,
    )
    buffers = create_data_buffers()
    workers = [ray.remote(num_cpus=1)(Worker).remote() for _ in range(4)]
    yield buffers, workers
    shutdown_data_buffers()
    ray.shutdown()


def open_entries(buffers) -> dict:
    """Open entries of each buffer once the last acks have landed (expected: none)."""
    return entries_once_settled(buffers, {node: {} for node in buffers})


def test_one_buffer_for_the_single_node(cluster):
    buffers, _ = cluster
    names = [a["name"] for a in ray.util.list_named_actors(all_namespaces=True)]
    assert [n for n in names if n.startswith(BUFFER_NAME_PREFIX)] == [buffer_name(next(iter(buffers)))]


def test_creating_the_buffers_again_keeps_the_creating_handles(cluster):
    """Ray ends a named actor once its creating handle is gone: a second job in the same driver (e.g. a
    resumed run) must not swap it for the looked-up one, or every later worker finds no buffer."""
    from siirl.data_coordinator import buffer

    buffers, _ = cluster
    again = create_data_buffers()
    assert list(again) == list(buffers)
    assert all(buffer._OWNED[node] is handle for node, handle in buffers.items())


def test_two_producers_to_one_consumer(cluster):
    buffers, w = cluster
    puts = [w[p].produce.remote(1, "rollout", p, 2, 1, 1, 5) for p in range(2)]
    got = ray.get(w[2].consume.remote(1, "rollout", 0, 1, 2))
    ray.get(puts)
    assert got["x"] == [float(i) for i in range(5)] + [1000.0 + i for i in range(5)]
    assert got["sample"][6] == {"producer": 1, "i": 1}
    assert open_entries(buffers) == {node: {} for node in buffers}


def test_four_producers_to_two_consumers_keep_groups_whole(cluster):
    buffers, w = cluster
    n, group = 9, 3
    puts = [w[p].produce.remote(2, "reward", p, 4, 2, 2, n, group) for p in range(4)]
    # Workers 0 and 1 produce and then consume: the usual DAG-worker pattern.
    gets = [w[c].consume.remote(2, "reward", c, 2, 4) for c in range(2)]
    ray.get(puts)
    parts = [ray.get(g) for g in gets]

    all_uids = [u for part in parts for u in part["uid"]]
    assert len(all_uids) == 36
    assert sorted(x for part in parts for x in part["x"]) == sorted(
        1000.0 * p + i for p in range(4) for i in range(n)
    )
    assert not set(parts[0]["uid"]) & set(parts[1]["uid"])  # every uid group lives on one consumer
    expected = assign_samples([describe_shard(make_shard(p, n, group), p, "") for p in range(4)], 2)
    global_x = np.array([1000.0 * p + i for p in range(4) for i in range(n)])
    for c in range(2):
        assert parts[c]["x"] == global_x[expected[c]].tolist()
    assert open_entries(buffers) == {node: {} for node in buffers}


def test_redistribute_between_layouts_and_identity_for_equal_layouts(cluster):
    _, w = cluster
    tp2, dp4 = (0, 0, 1, 1), (0, 1, 2, 3)
    outs = ray.get([w[r].redistribute.remote(3, r, tp2, dp4, 4, 1) for r in range(4)])
    assert sorted(x for o in outs for x in o["x"]) == [0.0, 1.0, 2.0, 3.0, 1000.0, 1001.0, 1002.0, 1003.0]
    assert all(len(o["x"]) == 2 and not o["same_object"] for o in outs)
    back = ray.get([w[r].redistribute.remote(4, r, dp4, tp2, 2, 1) for r in range(4)])
    assert back[0]["x"] == back[1]["x"] and back[2]["x"] == back[3]["x"]
    assert sorted(back[0]["x"] + back[2]["x"]) == sorted(1000.0 * p + i for p in range(4) for i in range(2))
    same = ray.get([w[r].redistribute.remote(5, r, dp4, dp4, 3, 1) for r in range(4)])
    assert all(o["same_object"] for o in same)


def raised_cause(ref):
    try:
        return ray.get(ref)
    except ray.exceptions.RayTaskError as err:
        raise err.as_instanceof_cause() from None


def test_a_missing_producer_times_out_the_consumer_naming_it(cluster):
    buffers, w = cluster
    producer, consumer = w[2], w[3]
    ray.get([producer.set_timeout.remote(0.3), consumer.set_timeout.remote(0.3)])
    missing = r"step 6 stage 'late' metadata of producer ranks \[1\]"
    raised_cause(producer.produce.remote(6, "late", 0, 2, 1, 1, 3))  # a producer never waits for peers
    with pytest.raises(DataCoordinatorTimeout, match=missing):
        raised_cause(consumer.consume.remote(6, "late", 0, 1, 2))
    assert sum(ray.get([b.drop_step.remote(6) for b in buffers.values()])) == 1
    assert open_entries(buffers) == {node: {} for node in buffers}
    ray.get([producer.set_timeout.remote(60.0), consumer.set_timeout.remote(60.0)])


def test_a_rerun_step_with_other_data_is_replanned(cluster):
    buffers, w = cluster
    for n in (3, 5):  # same step and stage twice; workers 0 and 1 produce and consume
        puts = [w[p].produce.remote(7, "retry", p, 2, 2, 2, n) for p in range(2)]
        gets = [w[c].consume.remote(7, "retry", c, 2, 2) for c in range(2)]
        ray.get(puts)
        got = sorted(x for g in ray.get(gets) for x in g["x"])
        assert got == sorted([float(i) for i in range(n)] + [1000.0 + i for i in range(n)])
    assert open_entries(buffers) == {node: {} for node in buffers}


def test_a_producer_rank_published_twice_fails_the_consumers(cluster):
    buffers, w = cluster
    ray.get([w[p].produce.remote(8, "dup", 0, 2, 1, 1, 3) for p in range(2)])  # both claim rank 0
    with pytest.raises(ValueError, match=r"producer rank 0 published step 8 stage 'dup' twice"):
        raised_cause(w[3].consume.remote(8, "dup", 0, 1, 2))
    assert sum(ray.get([b.drop_step.remote(8) for b in buffers.values()])) == 1
    assert open_entries(buffers) == {node: {} for node in buffers}


def test_a_cut_that_arrives_before_the_producers_publish_waits_for_it(cluster):
    """A consumer on another node learns of a shard from its own node's buffer and asks the producer's node
    for its rows; the producer's publish to that buffer is a separate call and may land second."""
    from siirl.data_coordinator.tensordict_ops import to_wire

    buffers, _ = cluster
    node, buffer = next(iter(buffers.items()))
    shard = make_shard(0, 3, 1)
    early = buffer.cut.remote(9, "late", 0, [2], 30.0)
    meta = describe_shard(shard, 0, node, "uid", "attention_mask")
    buffer.publish.remote(9, "late", meta, 1, [ray.put(to_wire(shard))])
    wire = ray.get(ray.get(early)[0])
    assert wire.num_rows == 1
    with pytest.raises(ValueError, match="no shard of producer rank 1 for step 9 stage 'late' here"):
        raised_cause(buffer.cut.remote(9, "late", 1, [0], 0.5))
    assert ray.get(buffer.drop_step.remote(9)) == 1


def test_images_reach_the_actor_intact_when_rollout_and_actor_layouts_differ(cluster, tmp_path):
    """A GRPO plan on 2 workers with rollout tensor parallel 2: the rollout's dp layout is (0, 0), the
    actor's (0, 1), so the rollout batch moves through the buffers; each actor rank gets its rows with
    their own pixel inputs (a text row's empty ones too)."""
    import torch
    from config_testutils import typed_config
    from dc_testutils import data_config
    from vlm_testutils import (
        build_image_processor,
        build_vlm_tokenizer,
        image_row,
        png_bytes,
        write_image_rows,
    )

    from siirl.dag_worker.layouts import role_layouts
    from siirl.data_coordinator import build_train_dataloader
    from siirl.execution.dag.builtin_pipelines import grpo_pipeline
    from siirl.execution.scheduler import plan_from_config

    cfg = typed_config({"trainer": {"n_gpus_per_node": 2}, "actor_rollout_ref": {"rollout": {"tensor_model_parallel_size": 2}}})
    layouts = role_layouts(plan_from_config(grpo_pipeline(), cfg))
    rollout, actor = layouts["rollout"], layouts["actor"]
    assert (rollout.dp_ranks, actor.dp_ranks) == ((0, 0), (0, 1))
    rows = [image_row(i, [{"bytes": png_bytes(i), "path": None}] if i % 3 else []) for i in range(8)]
    rows = [r if r["images"] else {**r, "prompt": [{"role": "user", "content": "Sum?"}]} for r in rows]
    config = data_config(train_files=[write_image_rows(tmp_path / "d.parquet", rows)], train_batch_size=8, max_prompt_length=32)
    loader = build_train_dataloader(config, build_vlm_tokenizer(), 0, 1, image_processor=build_image_processor())
    batch = next(iter(loader))
    _, w = cluster
    shares = ray.get([
        w[r].hand_over.remote(20, r, batch if rollout.is_leader(r) else None, rollout.dp_ranks, actor.dp_ranks)
        for r in range(2)
    ])
    assert sorted(i for share in shares for i in share["index"]) == sorted(batch["index"])
    assert all(share["index"] for share in shares)  # both actor ranks get rows
    position = {index: n for n, index in enumerate(batch["index"])}
    for share in shares:
        for row, index in enumerate(share["index"]):
            want = batch["multi_modal_inputs"][position[index]]
            got = share["multi_modal_inputs"][row]
            assert got.keys() == want.keys() and all(torch.equal(got[k], want[k]) for k in want)
            assert torch.equal(share["input_ids"][row], batch["input_ids"][position[index]])
    assert sum(bool(inputs) for share in shares for inputs in share["multi_modal_inputs"]) == 5
