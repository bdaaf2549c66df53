"""Asynchronous training on the warm workers: the rollout of step 2 is sampled while step 1 trains, and no
trained token is older than the staleness bound; colocated, and with the rollout on a rank of its own."""

from collections import Counter

from tests.e2e.e2e_helpers import read_metrics, run_main

ASYNC = [
    "trainer.v1.trainer_mode=colocate_async",
    "async_training.staleness_threshold=1",
    "async_training.partial_rollout=true",
    "async_training.chunk_tokens=2",
    "trainer.total_training_steps=2",
]


def test_one_step_off_policy_within_the_bound(tmp_path, ray_session):
    run = tmp_path / "run"
    assert run_main(run, *ASYNC) == 0
    steps = {r["step"]: r for r in read_metrics(run) if r["step"] > 0}
    assert sorted(steps) == [1, 2]
    # async/staleness_max is the max over every response token of every trained sample on every rank
    assert all(0 <= steps[s]["async/staleness_max"] <= 1 for s in steps)
    assert steps[1]["async/staleness_max"] == 0  # step 1 trains what the start weights sampled
    # step 2's prompts were drawn and started under version 0 while step 1 trained (it ends at version 1)
    assert steps[2]["async/staleness_max"] == 1
    for s in steps.values():
        assert 0 <= s["async/partial_fraction"] <= 1 and s["async/trainer_idle_s"] >= 0
        assert s["async/weight_sync_s"] >= 0 and s["async/rollout_idle_s"] >= 0
    assert steps[2]["async/engine_version"] >= 0


def test_separate_rollout_rank_streams_to_the_trainer(tmp_path, ray_session):
    """verl's fully-async layout on the two warm workers, from the mode alone (its default split of one node's
    devices): rank 0 rolls out, rank 1 trains; batches cross through the data coordinator, weights come back by
    broadcast after every update."""
    run = tmp_path / "run"
    assert run_main(run, "trainer.v1.trainer_mode=separate_async", "async_training.staleness_threshold=1",
                    "trainer.total_training_steps=2") == 0
    steps = {r["step"]: r for r in read_metrics(run) if r["step"] > 0}
    assert [steps[s]["async/staleness_max"] for s in (1, 2)] == [0, 1]
    # step 1's update reached the rollout rank (the broadcast took time there); its engine loads it at its next
    # piece of generation, which may begin before or after step 2's batch is taken: version 0 or 1 at that moment
    assert steps[2]["async/weight_sync_s"] > 0 and "timing_s/handoff" in steps[2]
    assert steps[2]["async/engine_version"] in (0, 1)
    assert "val/score" in steps[2] and steps[2]["val/prompts"] > 0  # validated on the rollout rank


def _recording_reward(tmp_path, log):
    """A score function that appends the dataset index of every training sample it scores to ``log``."""
    path = tmp_path / "recording_reward.py"
    path.write_text(
        "def compute_score(data_source, solution_str, ground_truth, extra_info=None):\n"
        "    if extra_info and extra_info.get('split') == 'train':\n"
        f"        with open({str(log)!r}, 'a') as out:\n"
        "            out.write(f\"{extra_info['index']}\\n\")\n"
        "    return 0.0\n"
    )
    return path


def test_resume_from_an_async_checkpoint_neither_loses_nor_repeats_a_sample(tmp_path, ray_session):
    """The producer draws a step ahead; the checkpoint keeps the loader where the trained steps left it, so
    the resumed run trains the prompts an uninterrupted run trains at step 3, once."""
    common = [*ASYNC[:2], "trainer.save_freq=1", "trainer.test_freq=-1", "trainer.seed=7"]
    straight_log, resumed_log = tmp_path / "straight.txt", tmp_path / "resumed.txt"
    straight, resumed = tmp_path / "straight", tmp_path / "resumed"
    reward = f"custom_reward_function.path={_recording_reward(tmp_path, straight_log)}"
    assert run_main(straight, "trainer.total_training_steps=3", reward, *common) == 0
    reward = f"custom_reward_function.path={_recording_reward(tmp_path, resumed_log)}"
    assert run_main(resumed, "trainer.total_training_steps=2", reward, *common) == 0
    assert run_main(resumed, "trainer.total_training_steps=3", "trainer.resume_mode=auto", reward, *common) == 0
    assert sorted(r["step"] for r in read_metrics(resumed) if r["step"] > 0) == [1, 2, 3]
    trained = Counter(straight_log.read_text().split())
    assert sum(trained.values()) == 3 * 8 * 4  # 3 steps of 8 prompts x 4 samples
    assert Counter(resumed_log.read_text().split()) == trained
