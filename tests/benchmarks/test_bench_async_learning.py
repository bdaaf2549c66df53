"""benchmarks/bench_async_learning.py without Ray or training: the validation curve read from metrics rows is
keyed by trained samples, sync and async curves line up on the points both have, and the verdict is one-sided
(async above sync has reached it) at the last point while the largest gap is reported either way."""

import pytest


@pytest.fixture(scope="module")
def bench(load_benchmark):
    return load_benchmark("bench_async_learning")


def rows(vals: dict[int, float], samples_per_step: int = 256) -> list[dict]:
    out = [{"step": 0, "val/score": vals[0]}] if 0 in vals else []
    for step in range(1, max(vals) + 1):
        seconds = 0.1 + step / 1000  # a different step time every step: samples/s x seconds must still add up
        row = {"step": step, "timing_s/step": seconds, "perf/samples_per_s": samples_per_step / seconds}
        out.append(row | ({"val/score": vals[step]} if step in vals else {}))
    return out


def test_curve_keyed_by_trained_samples(bench):
    assert bench.val_curve(rows({0: 0.2, 50: 0.3, 100: 0.35})) == {0: 0.2, 12800: 0.3, 25600: 0.35}
    assert bench.val_curve(rows({3: 0.25}, samples_per_step=32)) == {96: 0.25}


def test_align_on_shared_points(bench):
    sync = {0: 0.2, 12800: 0.3, 25600: 0.35}
    async_ = {0: 0.2, 12800: 0.25, 25600: 0.34, 38400: 0.4}
    points = bench.align(sync, async_)
    assert [p[:3] for p in points] == [(0, 0.2, 0.2), (12800, 0.3, 0.25), (25600, 0.35, 0.34)]
    assert [p[3] for p in points] == pytest.approx([0.0, -0.05, -0.01])


def test_verdict(bench):
    points = bench.align({0: 0.2, 100: 0.3, 200: 0.35}, {0: 0.2, 100: 0.25, 200: 0.34})
    v = bench.verdict(points)
    assert v["within"] and v["samples"] == 200 and v["last_gap"] == pytest.approx(-0.01)
    assert v["max_abs_gap"] == pytest.approx(0.05) and v["max_gap_at"] == 100
    assert not bench.verdict(bench.align({0: 0.3}, {0: 0.27}))["within"]
    assert bench.verdict(bench.align({0: 0.3}, {0: 0.5}))["within"]  # above sync: reached
    with pytest.raises(ValueError, match="no validation point"):
        bench.verdict([])


def test_report_lines(bench):
    lines = bench.report({1: bench.align({0: 0.2, 100: 0.3}, {0: 0.2, 100: 0.27})})
    assert lines[2].split() == ["1", "100", "0.300", "0.270", "-0.030"]
    assert "NOT within 0.02" in lines[-1] and "gap -0.030" in lines[-1]
