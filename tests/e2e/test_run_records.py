"""What a run leaves in its folder, on the two warm workers: validation logs the score function's extra keys
(``val/reward_extra/*``), ``global_profiler.tool=torch`` writes one trace per profiled step and rank, and a
second fresh run into the same folder sets the first one's records aside instead of appending to them."""

import json

from .e2e_helpers import read_metrics, run_main

REWARD = """def compute_score(data_source, solution_str, ground_truth, extra_info=None):
    return {"score": float(solution_str.strip() == ground_truth), "answered": float(bool(solution_str.strip()))}
"""


def test_profiled_run_logs_val_reward_extra_and_a_rerun_sets_records_aside(tmp_path, ray_session):
    reward = tmp_path / "reward.py"
    reward.write_text(REWARD)
    run = tmp_path / "run"
    keys = ["trainer.total_training_steps=2", "trainer.test_freq=2", f"custom_reward_function.path={reward}",
            "global_profiler.tool=torch", "global_profiler.steps=[2]", "trainer.resume_mode=disable"]
    assert run_main(run, *keys) == 0
    first = read_metrics(run)
    assert "reward_extra/answered" in first[0] and 0.0 <= first[-1]["val/reward_extra/answered"] <= 1.0
    traces = sorted(p.relative_to(run).as_posix() for p in (run / "profile").rglob("*.json"))
    assert traces == ["profile/step_2/rank_0.json", "profile/step_2/rank_1.json"]
    assert json.loads((run / traces[0]).read_text())["traceEvents"]

    assert run_main(run, *keys[:3], "trainer.resume_mode=disable") == 0
    assert [r["step"] for r in read_metrics(run)] == [1, 2]  # the first run's steps are not in it
    (aside,) = (run / "previous_runs").iterdir()
    assert [r["step"] for r in read_metrics(aside)] == [1, 2] and (aside / "profile").is_dir()
