"""benchmarks/bench_vlm.py's layout half on a tiny batch: ``packed`` encodes one image per row, ``shared``
fewer (each distinct prompt image once per micro-batch), and the JSON line carries their ratios."""

import json

import pytest
import torch.distributed as dist
from dist_testutils import init_world_of_one


@pytest.fixture(scope="module")
def bench_vlm(load_benchmark):
    created = not dist.is_initialized()
    if created:
        init_world_of_one()
    yield load_benchmark("bench_vlm")
    if created:
        dist.destroy_process_group()


def test_shared_encodes_fewer_prompt_images_than_packed(bench_vlm, capsys):
    args = bench_vlm.parse_args(
        ["--steps", "0", "--prompts", "2", "--n", "4", "--micro", "8", "--repeats", "1"]
    )
    layouts = {row["layout"]: row for row in bench_vlm.layout_comparison(args, "cpu")}
    rows = args.prompts * args.n
    assert (layouts["packed"]["images"], layouts["packed"]["patches"]) == (
        rows,
        16 * rows,
    )  # 28x28: 16 patches
    assert args.prompts <= layouts["shared"]["images"] < rows
    assert all(layouts[name]["forward"] > 0 and layouts[name]["backward"] > 0 for name in layouts)
    record = bench_vlm.report(args, "cpu", None, list(layouts.values()))
    line = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert line == json.loads(json.dumps(record))
    assert line["packed_over_shared"]["tower_images"] == rows / layouts["shared"]["images"]
