"""verl's ``actor_rollout_ref.rollout.skip``: a run dumps its rollouts, a second run trains on the dump (its
rewards are the first run's, step for step), on the two warm workers."""

from .e2e_helpers import read_metrics, run_main


def test_a_run_dumps_its_rollouts_and_the_next_trains_from_the_dump(tmp_path, ray_session):
    dump = tmp_path / "dump"
    keys = ["trainer.total_training_steps=2", "actor_rollout_ref.rollout.skip.enable=true",
            f"actor_rollout_ref.rollout.skip.dump_dir={dump}", "actor_rollout_ref.rollout.skip.max_dump_step=2",
            "trainer.resume_mode=disable"]
    assert run_main(tmp_path / "first", *keys) == 0
    assert sorted(p.relative_to(dump).as_posix() for p in dump.rglob("*.safetensors")) == [
        f"step_{s}/rank_{r}.safetensors" for s in (1, 2) for r in (0, 1)
    ]
    # a different sampling seed: only a replay gives the same rewards
    assert run_main(tmp_path / "second", *keys, "trainer.seed=7") == 0
    first, second = read_metrics(tmp_path / "first"), read_metrics(tmp_path / "second")
    assert [r["rollout/replayed"] for r in first] == [0.0, 0.0] and [r["rollout/replayed"] for r in second] == [1.0, 1.0]
    assert [r["reward/mean"] for r in second] == [r["reward/mean"] for r in first]
    assert [r["response_length/mean"] for r in second] == [r["response_length/mean"] for r in first]
