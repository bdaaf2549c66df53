"""Images, LoRA adapters and the reward model are checked by the launcher before Ray: one line, exit 2
(a decompression bomb was a PIL traceback; the others were found by a worker after Ray started)."""

from __future__ import annotations

import io
import json
import struct
import zlib
from pathlib import Path

import pytest
from PIL import Image

from siirl.embedded_assets import default_model_path
from tests.cli.cli_testutils import one_line_refusal
from tests.vlm_testutils import image_row, png_bytes, write_image_rows


def bomb_png(side: int = 30000) -> bytes:
    """A tiny PNG whose header claims ``side`` x ``side`` pixels (PIL refuses past 2 x MAX_IMAGE_PIXELS)."""
    buffer = io.BytesIO()
    Image.new("L", (4, 4)).save(buffer, format="PNG")
    data = bytearray(buffer.getvalue())
    data[16:24] = struct.pack(">II", side, side)  # IHDR width, height
    data[29:33] = struct.pack(">I", zlib.crc32(bytes(data[12:29])))
    return bytes(data)


@pytest.mark.parametrize(("image", "needle"), [
    (bomb_png(), "image 0 (bomb.png) is too large to decode (Image size (900000000 pixels) exceeds limit"),
    (b"\x89PNG garbage", "image 0 (bomb.png) is not a readable image"),
])
def test_a_bad_image_in_the_image_column_is_one_line(capsys, tmp_path, image, needle):
    rows = [image_row(i, [{"bytes": png_bytes(i), "path": None}]) for i in range(3)]
    rows.append(image_row(3, [{"bytes": image, "path": "bomb.png"}]))
    files = write_image_rows(tmp_path / "train.parquet", rows)
    err = one_line_refusal(capsys, "--print-config", "device=cpu", "task=digits", f"data.train_files=[{files}]",
                           f"data.val_files=[{files}]", f"trainer.output_dir={tmp_path / 'out'}")
    assert "row 3: " + needle in err, err


def adapter_dir(tmp_path, config_text=None, weights=b"\xff" * 64):
    from peft import LoraConfig

    folder = tmp_path / "adapter"
    LoraConfig(r=2, lora_alpha=4, target_modules=["q_proj"]).save_pretrained(str(folder))
    if config_text is not None:
        (folder / "adapter_config.json").write_text(config_text)
    (folder / "adapter_model.safetensors").write_bytes(weights)
    return folder


@pytest.mark.parametrize(("config_text", "needle"), [
    (None, "adapter_model.safetensors are corrupt or truncated"),
    ("{not json", "adapter_config.json does not load"),
])
def test_a_damaged_lora_adapter_is_one_line(capsys, tmp_path, config_text, needle):
    folder = adapter_dir(tmp_path, config_text)
    err = one_line_refusal(capsys, "--print-config", "device=cpu", f"actor_rollout_ref.model.lora_adapter_path={folder}",
                           f"trainer.output_dir={tmp_path / 'out'}")
    assert needle in err, err


def test_a_saved_dora_adapter_is_one_line(capsys, tmp_path):
    folder = adapter_dir(tmp_path)
    config = json.loads((folder / "adapter_config.json").read_text())
    (folder / "adapter_config.json").write_text(json.dumps({**config, "use_dora": True}))
    err = one_line_refusal(capsys, "--print-config", "device=cpu", f"actor_rollout_ref.model.lora_adapter_path={folder}",
                           f"trainer.output_dir={tmp_path / 'out'}")
    assert err.endswith(f"lora_adapter_path={folder} is a DoRA adapter, which is not supported (merged weight sync "
                        "needs plain LoRA)"), err


@pytest.mark.parametrize(("path", "needle"), [
    ("/nonexistent/rm", "model path '/nonexistent/rm' does not exist"),
    (default_model_path(), "holds a causal LM (Qwen2ForCausalLM), not a sequence classifier"),
])
def test_a_reward_model_that_cannot_score_is_one_line(capsys, tmp_path, path, needle):
    err = one_line_refusal(capsys, "--print-config", "device=cpu", "reward_model.enable=true",
                           f"reward_model.model.path={path}", f"trainer.output_dir={tmp_path / 'out'}")
    assert needle in err, err


def sliding_window_model(tmp_path):
    """The tiny policy with a sliding-window middle layer (its weights and tokenizer linked, its config edited)."""
    folder = tmp_path / "sliding"
    folder.mkdir()
    for item in Path(default_model_path()).iterdir():
        if item.name != "config.json":
            (folder / item.name).symlink_to(item)
    config = json.loads((Path(default_model_path()) / "config.json").read_text())
    config.update(use_sliding_window=True, sliding_window=16,
                  layer_types=["full_attention", "sliding_attention", "full_attention"])
    (folder / "config.json").write_text(json.dumps(config))
    return folder


@pytest.mark.parametrize("asks_shared", [
    "actor_rollout_ref.model.remove_padding_layout=shared", "actor_rollout_ref.actor.use_prefix_grouper=true",
])
def test_the_shared_layout_of_a_sliding_window_model_is_one_line(capsys, tmp_path, asks_shared):
    model = sliding_window_model(tmp_path)
    err = one_line_refusal(capsys, "--print-config", "device=cpu", f"actor_rollout_ref.model.path={model}", asks_shared,
                           f"trainer.output_dir={tmp_path / 'out'}")
    assert err == (
        "siirl: error: bad config: actor_rollout_ref.model: the shared layout (remove_padding_layout=shared, or "
        "actor.use_prefix_grouper) attends to a prompt once per micro-batch, which needs full causal attention; "
        f"{model} has sliding_attention layers (use remove_padding_layout=auto)"
    )
