"""Two GRPO steps of a tiny vision-language policy on image rows, as verl's geo3k scripts run them: images
in the parquet, FSDP2 on 2 DAG workers, padding-free layouts, a frozen vision tower and a KL loss."""

import sys
from pathlib import Path

import pytest

from .e2e_helpers import read_metrics, run_main

pytestmark = pytest.mark.slow
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from vlm_testutils import image_row, png_bytes, save_tiny_vlm, write_image_rows


def test_two_grpo_steps_with_images(tmp_path, ray_session):
    model = save_tiny_vlm(tmp_path / "model")
    rows = [{**image_row(i, [{"bytes": png_bytes(i), "path": None}]), "data_source": "siirl/arith_add"} for i in range(32)]
    train, val = write_image_rows(tmp_path / "train.parquet", rows), write_image_rows(tmp_path / "val.parquet", rows[:8])
    run = tmp_path / "run"
    code = run_main(
        run, "trainer.total_training_steps=2", "data.val_batch_size=8", f"data.train_files={train}",
        f"data.val_files={val}", f"actor_rollout_ref.model.path={model}", "data.max_prompt_length=20",
        "data.max_response_length=4", "actor_rollout_ref.actor.strategy=fsdp",
        "actor_rollout_ref.model.use_remove_padding=true", "actor_rollout_ref.actor.freeze_vision_tower=true",
        "actor_rollout_ref.actor.use_kl_loss=true", "data.image_key=images",
    )
    assert code == 0
    steps = {r["step"]: r for r in read_metrics(run) if r["step"] > 0}
    assert sorted(steps) == [1, 2]
    assert all(s["response_length/mean"] > 0 and "actor/kl_loss" in s for s in steps.values())
