"""benchmarks/bench_rollout_tail.py at its smallest: both sampling paths run on the long-tail model and the
JSON line carries every figure the table prints."""


def test_smallest_run_reports_both_paths(load_benchmark, capsys):
    bench = load_benchmark("bench_rollout_tail")
    bench.ROWS, bench.STREAMS = (8,), ((2, None),)
    result = bench.main(["--prompts", "2", "--batches", "1"])
    assert result["decode_ms"][8] > 0 and result["prefill_ms"][8] > 0
    assert result["sync_s"] > 0 and result["stream_2_None_s"] > 0
    assert 1 <= result["length_mean"] <= result["length_max"] <= bench.RESPONSE
    assert capsys.readouterr().out.splitlines()[-1].startswith('{"benchmark": "rollout_tail"')
