"""verl's multimodal rows: ``<image>`` expansion, pixel inputs, the over-long filter and one-line image errors."""

from __future__ import annotations

import pyarrow as pa
import pytest
import torch
from dc_testutils import data_config
from PIL import Image
from vlm_testutils import (
    IMAGE_ROW_SCHEMA,
    TOKENS_PER_28PX_IMAGE,
    build_image_processor,
    build_vlm_tokenizer,
    image_row,
    png_bytes,
    write_image_rows,
)

from siirl.data_coordinator import build_train_dataloader
from siirl.data_coordinator.errors import DataError


@pytest.fixture(scope="module")
def vlm_tokenizer():
    return build_vlm_tokenizer()


PROCESSOR = build_image_processor()


def loader_of(path, tokenizer, processor=PROCESSOR, **overrides):
    settings = {"train_batch_size": 2, "shuffle": False, "max_prompt_length": 32, **overrides}
    config = data_config(train_files=[path], **settings)
    return build_train_dataloader(config, tokenizer, 0, 1, image_processor=processor)


def test_placeholders_become_vision_tokens_and_rows_carry_pixel_inputs(tmp_path, vlm_tokenizer):
    (tmp_path / "b.png").write_bytes(png_bytes(2, size=56))
    rows = [
        image_row(0, [{"bytes": png_bytes(0), "path": None}]),
        image_row(1, [{"bytes": None, "path": str(tmp_path / "b.png")}], content="Is<image>a digit?"),
    ]
    batch = next(iter(loader_of(write_image_rows(tmp_path / "d.parquet", rows), vlm_tokenizer)))
    pad = vlm_tokenizer.convert_tokens_to_ids("<|image_pad|>")
    first = vlm_tokenizer.decode(batch["input_ids"][0][batch["attention_mask"][0].bool()])
    assert first == "[U]<|vision_start|>" + "<|image_pad|>" * TOKENS_PER_28PX_IMAGE + "<|vision_end|>Digit?[A]"
    assert (batch["input_ids"] == pad).sum(dim=1).tolist() == [4, 16]  # 56x56: 64 patches, merged 2x2
    inputs = batch["multi_modal_inputs"]
    assert inputs[0]["image_grid_thw"].tolist() == [[1, 4, 4]] and inputs[0]["pixel_values"].shape == (16, 294)
    assert inputs[1]["image_grid_thw"].tolist() == [[1, 8, 8]]
    assert [img.size for img in batch["multi_modal_data"][1]["image"]] == [(56, 56)]  # decoded, for vLLM
    processed = build_image_processor()(images=[Image.open(tmp_path / "b.png")], return_tensors="pt")
    assert torch.equal(inputs[1]["pixel_values"], processed["pixel_values"])


def test_overlong_filter_counts_the_expanded_image_tokens(tmp_path, vlm_tokenizer):
    # "[U]Digit?[A]" is 8 tokens; with a 28x28 image's block (1 + 4 + 1) 14, with a 56x56 one's 26.
    rows = [image_row(i, [{"bytes": png_bytes(i, size=56 if i % 2 else 28), "path": None}]) for i in range(8)]
    loader = loader_of(write_image_rows(tmp_path / "d.parquet", rows), vlm_tokenizer, max_prompt_length=20)
    assert loader.num_filtered == 4
    assert [i for batch in loader for i in batch["index"]] == [0, 2, 4, 6]


def test_a_text_row_of_a_vision_dataset_has_empty_pixel_inputs(tmp_path, vlm_tokenizer):
    rows = [image_row(0, [{"bytes": png_bytes(0), "path": None}]), image_row(1, [], content="Digit?")]
    batch = next(iter(loader_of(write_image_rows(tmp_path / "d.parquet", rows), vlm_tokenizer)))
    assert batch["multi_modal_inputs"][1] == {} and batch["multi_modal_data"][1] == {}


@pytest.mark.parametrize(
    ("images", "content", "message"),
    [
        ([{"bytes": None, "path": "/nowhere/x.png"}], "<image>Digit?", r"row 3: image 0 \(/nowhere/x.png\) not found"),
        ([{"bytes": b"not a png", "path": "x.png"}], "<image>Digit?", r"row 3: image 0 \(x.png\) is not a readable image"),
        ([{"bytes": None, "path": None}], "<image>Digit?", "row 3: image 0 has neither bytes nor a path"),
        ([{"bytes": png_bytes(0), "path": None}], "Digit?", r"row 3: the prompt has 0 <image> placeholder\(s\) but the row has 1"),
    ],
)
def test_bad_images_are_one_line_errors_naming_row_and_file_at_load(tmp_path, vlm_tokenizer, images, content, message):
    rows = [image_row(i, [{"bytes": png_bytes(i), "path": None}]) for i in range(4)]
    rows[3] = image_row(3, images, content=content)
    path = write_image_rows(tmp_path / "d.parquet", rows)
    with pytest.raises(DataError, match=message) as info:
        loader_of(path, vlm_tokenizer)  # the scan checks every row, not only the first batch
    assert "\n" not in str(info.value) and "d.parquet" in str(info.value)


def test_image_rows_are_checked_without_the_overlong_scan_too(tmp_path, vlm_tokenizer):
    rows = [image_row(i, [{"bytes": png_bytes(i), "path": None}]) for i in range(4)]
    rows[3] = image_row(3, [{"bytes": None, "path": "/nowhere/x.png"}])
    path = write_image_rows(tmp_path / "d.parquet", rows)
    with pytest.raises(DataError, match="row 3: image 0"):
        loader_of(path, vlm_tokenizer, filter_overlong_prompts=False, truncation="left")


def test_images_for_a_text_policy_and_videos_are_refused(tmp_path, vlm_tokenizer):
    path = write_image_rows(tmp_path / "d.parquet", [image_row(i, [{"bytes": png_bytes(i), "path": None}]) for i in range(2)])
    with pytest.raises(DataError, match="row 0: has images .* no vision tower"):
        loader_of(path, vlm_tokenizer, processor=None)
    schema = IMAGE_ROW_SCHEMA.append(pa.field("videos", pa.list_(pa.string())))
    rows = [{**image_row(i, []), "prompt": [{"role": "user", "content": "Digit?"}], "videos": ["v.mp4"]} for i in range(2)]
    video_path = write_image_rows(tmp_path / "v.parquet", rows, schema)
    with pytest.raises(DataError, match="row 0: has videos .*video input is not supported"):
        loader_of(video_path, vlm_tokenizer)


def test_plain_path_cells_are_read(tmp_path, vlm_tokenizer):
    (tmp_path / "a.png").write_bytes(png_bytes(5))
    schema = IMAGE_ROW_SCHEMA.set(IMAGE_ROW_SCHEMA.get_field_index("images"), pa.field("images", pa.list_(pa.string())))
    rows = [image_row(i, [str(tmp_path / "a.png")]) for i in range(2)]
    batch = next(iter(loader_of(write_image_rows(tmp_path / "d.parquet", rows, schema), vlm_tokenizer)))
    assert batch["multi_modal_inputs"][0]["image_grid_thw"].tolist() == [[1, 4, 4]]


def test_a_broken_image_anywhere_fails_the_plan_before_ray(tmp_path):
    from vlm_testutils import save_tiny_vlm

    from siirl.errors import SiirlUserError
    from siirl.main_dag import prepare

    rows = [image_row(i, [{"bytes": png_bytes(i), "path": None}]) for i in range(24)]
    rows[21] = image_row(21, [{"bytes": None, "path": str(tmp_path / "gone.png")}])
    train = write_image_rows(tmp_path / "train.parquet", rows)
    overrides = [
        "device=cpu", "trainer.n_gpus_per_node=2", f"data.train_files={train}", "data.val_files=[]",
        f"actor_rollout_ref.model.path={save_tiny_vlm(tmp_path / 'model')}", "data.train_batch_size=8",
        "actor_rollout_ref.actor.ppo_mini_batch_size=8", "data.max_prompt_length=20",
        f"trainer.output_dir={tmp_path / 'out'}",
    ]
    with pytest.raises(SiirlUserError, match=r"train.parquet row 21: image 0 \(.*gone.png\) not found") as info:
        prepare(overrides, None, None)
    assert "\n" not in str(info.value)


def test_images_move_with_their_rows_between_dp_layouts(tmp_path, vlm_tokenizer):
    """What the coordinator does when the rollout and actor dp layouts differ: rows leave as wire batches,
    are picked and re-joined; every row keeps its own pixel inputs."""
    import numpy as np

    from siirl.data_coordinator.tensordict_ops import from_wires, to_wire, wire_take

    rows = [image_row(i, [{"bytes": png_bytes(i), "path": None}] if i % 3 else []) for i in range(8)]
    rows = [r if r["images"] else {**r, "prompt": [{"role": "user", "content": "Sum?"}]} for r in rows]
    path = write_image_rows(tmp_path / "d.parquet", rows)
    producers = [next(iter(loader_of(path, vlm_tokenizer, train_batch_size=8, shuffle=True, seed=s))) for s in (1, 2)]
    assert producers[0]["index"] != producers[1]["index"]  # two ranks, different rows
    wires = [wire_take(to_wire(p), np.array([3, 0, 5])) for p in producers]  # one consumer's share of each
    moved = from_wires(wires)
    expected = [producers[p]["multi_modal_inputs"][r] for p in range(2) for r in (3, 0, 5)]
    for got, want in zip(moved["multi_modal_inputs"], expected):
        assert got.keys() == want.keys() and all(torch.equal(got[k], want[k]) for k in want)
    assert torch.equal(moved["input_ids"][:3], producers[0]["input_ids"][[3, 0, 5]])
