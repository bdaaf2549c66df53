"""bench_soak's reading of a run: steps from a growing metrics.jsonl, and the flatness verdict."""

import json


def _row(step, driver_rss, worker_rss, fds=40):
    return {"step": step, "driver": (driver_rss, fds), "rank_0": (worker_rss, fds), "metrics_kb": step / 10}


def test_steps_are_read_from_what_was_appended_including_a_line_cut_in_two(tmp_path, load_benchmark):
    soak = load_benchmark("bench_soak")
    path = tmp_path / "metrics.jsonl"
    counter = soak.StepCounter(path)
    assert counter.poll() == 0
    path.write_bytes(json.dumps({"step": 1}).encode() + b"\n" + b'{"step": ')
    assert counter.poll() == 1
    with open(path, "ab") as file:
        file.write(b'2}\n')
    assert counter.poll() == 2


def test_flat_needs_rss_growth_under_the_bound_after_warm_up_and_constant_fds(load_benchmark):
    soak = load_benchmark("bench_soak")
    rows = [_row(50, 500, 3000), _row(100, 510, 3100), _row(150, 512, 3120)]  # warm-up growth is not counted
    result = soak.verdict(rows, warmup=100, max_growth=0.05, total=300)
    assert result["flat"] and result["rss_after_warmup_mb"] == 3610 and result["fds"] == {"driver": [40], "rank_0": [40]}
    assert not soak.verdict([*rows, _row(200, 520, 3400)], warmup=100, max_growth=0.05, total=300)["flat"]  # +5.4%
    assert not soak.verdict([rows[1], _row(150, 510, 3100, fds=41)], warmup=100, max_growth=0.05, total=300)["flat"]
    closing = [rows[1], _row(150, 510, 3100, fds=30)]  # the final step's sample: files being closed
    assert soak.verdict(closing, warmup=100, max_growth=0.05, total=150)["flat"]
    assert "| 150 | 512 / 40 | 3120 / 40 | 3632 | 15 |" in soak.table(rows)


def test_descriptors_are_the_fewest_of_the_reads_so_a_file_open_for_one_write_is_not_a_leak(tmp_path, load_benchmark):
    import psutil

    soak = load_benchmark("bench_soak")
    me = psutil.Process()
    before = soak._usage(me)[1]
    with open(tmp_path / "held", "w"):  # open across every read: counted
        assert soak._usage(me)[1] == before + 1

    class Writing:  # a worker caught mid-write: one more descriptor on the first read only
        reads = iter([before + 1, before, before])

        def memory_info(self):
            return me.memory_info()

        def num_fds(self):
            return next(self.reads)

    assert soak._usage(Writing())[1] == before
