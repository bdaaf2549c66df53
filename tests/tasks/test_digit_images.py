"""The digit-image task: verl's multimodal parquet layout, images that show the digit, determinism,
disjoint splits, the shipped files, CLI and bad sizes."""

import hashlib
import io

import numpy as np
import pyarrow.parquet as pq
import pytest
from PIL import Image

from siirl.embedded_assets import default_vlm_data_files
from siirl.tasks import digit_images
from siirl.tasks.digit_images import FONT, PALETTE, SCALE, DigitExample, generate, split_examples


def _combo(row) -> tuple:
    info = row["extra_info"]
    return info["digit"], info["x"], info["y"], info["colour"]


def test_rows_hold_one_placeholder_and_an_image_of_the_digit(tmp_path):
    train_path, _ = generate(str(tmp_path), seed=3, n_train=40, n_val=8)
    table = pq.read_table(train_path)
    assert table.column_names == ["data_source", "prompt", "images", "ability", "reward_model", "extra_info"]
    for row in table.to_pylist():
        digit, x, y, colour = _combo(row)
        assert row["data_source"] == "siirl/digit_images"
        assert row["prompt"] == [{"role": "user", "content": "<image>Digit?"}]
        assert row["prompt"][0]["content"].count("<image>") == len(row["images"]) == 1
        assert row["reward_model"] == {"style": "rule", "ground_truth": str(digit)}
        assert row["images"][0]["path"] is None
        pixels = np.asarray(Image.open(io.BytesIO(row["images"][0]["bytes"])))
        assert pixels.shape == (28, 28, 3)
        lit = pixels.any(-1)
        assert lit.sum() == sum(line.count("#") for line in FONT[digit]) * SCALE * SCALE
        assert (pixels[lit] == PALETTE[colour]).all()
        rows, cols = np.nonzero(lit)
        glyph = lit[y : y + 20, x : x + 12][::SCALE, ::SCALE]
        assert ["".join("#" if c else "." for c in line) for line in glyph] == list(FONT[digit])
        assert rows.min() >= y and cols.min() >= x and rows.max() < y + 20 and cols.max() < x + 12


def test_deterministic_and_seed_dependent(tmp_path):
    digests = []
    for name, seed in (("a", 0), ("b", 0), ("c", 1)):
        generate(str(tmp_path / name), seed=seed, n_train=30, n_val=10)
        digests.append(hashlib.sha256((tmp_path / name / "val.parquet").read_bytes()).hexdigest())
    assert digests[0] == digests[1] != digests[2]


def test_splits_are_disjoint_and_cover_every_combination():
    train, val = split_examples(0, digit_images.DEFAULT_N_TRAIN, digit_images.DEFAULT_N_VAL)
    assert len(set(train)) == len(train) and len(set(val)) == len(val) == 1024
    assert not set(train) & set(val)
    assert len(train) + len(val) == digit_images.NUM_EXAMPLES == 10 * 17 * 9 * len(PALETTE)
    assert {e.digit for e in val} == set(range(10))


def test_shipped_files_match_the_builder():
    train_path, val_path = default_vlm_data_files()
    train, val = pq.read_table(train_path).to_pylist(), pq.read_table(val_path).to_pylist()
    assert (len(train), len(val)) == (digit_images.DEFAULT_N_TRAIN, 1024)
    assert not {_combo(r) for r in train} & {_combo(r) for r in val}
    expected_val = split_examples(0, digit_images.DEFAULT_N_TRAIN, digit_images.DEFAULT_N_VAL)[1]
    assert [DigitExample(*_combo(r)) for r in val] == expected_val


@pytest.mark.parametrize(
    ("n_train", "n_val", "match"),
    [(12000, 241, "exceeds the 12240 distinct images"), (5, -1, "must be >= 0")],
)
def test_bad_sizes(n_train, n_val, match):
    with pytest.raises(ValueError, match=match):
        split_examples(0, n_train, n_val)


def test_cli(tmp_path, capsys):
    digit_images.main(["--out", str(tmp_path), "--n-train", "6", "--n-val", "3"])
    assert pq.read_table(tmp_path / "train.parquet").num_rows == 6
    assert pq.read_table(tmp_path / "val.parquet").num_rows == 3
    assert "wrote" in capsys.readouterr().out
