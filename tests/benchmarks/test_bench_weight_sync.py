"""benchmarks/bench_weight_sync.py: the in-place cell on the embedded model (the row's sizes are the model's,
the table carries it), and the config-built models are the ~30M and ~100M the issue names."""

import pytest
import torch
from transformers import Qwen2Config, Qwen2ForCausalLM


@pytest.fixture(scope="module")
def bench(load_benchmark):
    return load_benchmark("bench_weight_sync")


def test_in_place_row_and_table(bench):
    row = bench.measure("in_place", "embedded", steps=1, bucket_mb=1)
    assert row["params_m"] == pytest.approx(0.62, abs=0.01) and row["mb"] == pytest.approx(2.4, abs=0.1)
    assert row["sync_s"] > 0 and row["gb_per_s"] > 0
    assert "| embedded | 0.62 | 2.4 | in_place |" in bench.table([row])


@pytest.mark.parametrize(("size", "millions"), [("30m", 31.1), ("100m", 100.1)])
def test_config_built_sizes(bench, size, millions):
    with torch.device("meta"):  # shapes only, no memory
        model = Qwen2ForCausalLM(Qwen2Config(tie_word_embeddings=True, **bench.SHAPES[size]))
    assert sum(p.numel() for p in model.parameters()) / 1e6 == pytest.approx(millions, abs=0.1)
