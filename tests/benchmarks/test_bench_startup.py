"""benchmarks/bench_startup.py's arithmetic on made-up metrics rows (no job is launched): the start-up phases
add up to the time to the first step, and that plus what follows to the wall; two checkouts get ratios."""

import json

import pytest

from siirl.startup_timing import PREFIX, TOTAL

PHASES = {"interpreter": 0.2, "imports": 4.0, "ray": 3.0, "workers": 6.0, "models": 0.5, "validation": 0.3}


def rows(scale: float = 1.0) -> list[dict]:
    first = {f"{PREFIX}{name}": s * scale for name, s in PHASES.items()}
    first.update({TOTAL: sum(PHASES.values()) * scale, "timing_s/step": 0.5, "timing_s/reduce_metrics": 0.1})
    return [{"step": 0, "val/score": 0.2}, {"step": 1, **first},
            {"step": 2, "timing_s/step": 0.4, "timing_s/reduce_metrics": 0.1, "timing_s/validate": 0.2}]


@pytest.fixture(scope="module")
def bench(load_benchmark):
    return load_benchmark("bench_startup")


def test_phases_add_up_to_the_first_step_and_the_rest_to_the_wall(bench):
    split = bench.split(rows(), wall_s=20.0)
    assert [name for name in split if name in PHASES] == list(PHASES)
    assert split[bench.FIRST_STEP] == pytest.approx(sum(split[name] for name in PHASES))
    assert split["first step"] == pytest.approx(0.6)
    assert split["later steps and validation"] == pytest.approx(0.7)
    parts = split[bench.FIRST_STEP] + sum(split[name] for name in bench.AFTER)
    assert parts == pytest.approx(split[bench.WALL]) and split[bench.WALL] == 20.0


def test_a_checkout_without_start_up_marks_has_only_its_wall_and_cpu(bench):
    bare = [{key: value for key, value in row.items() if not key.startswith(PREFIX)} for row in rows()]
    assert bench.split(bare, wall_s=30.0, cpu_s=45.0) == {bench.WALL: 30.0, bench.CPU: 45.0}


def test_two_checkouts_get_medians_and_paired_ratios(bench, capsys):
    rounds = [{"this": bench.split(rows(1.0), 20.0, 30.0), "other": bench.split(rows(2.0), 40.0, 60.0)}
              for _ in range(3)]
    summary = bench.summarize(rounds, ["this", "other"])
    assert summary["ratio"][bench.WALL] == pytest.approx(0.5) == summary["ratio"][bench.CPU]
    assert summary["ratio"]["imports"] == pytest.approx(0.5)
    assert summary["median_s"]["other"]["workers"] == pytest.approx(12.0)
    bench.print_table(summary, ["this", "other"], len(rounds))
    table = capsys.readouterr().out
    assert "this / other" in table and "0.50x" in table
    assert json.loads(json.dumps(summary)) == summary
