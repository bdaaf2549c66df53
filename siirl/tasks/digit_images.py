"""Read one digit off a small image, in verl's multimodal parquet format: the embedded VLM task.

Each image is 28x28 (four text tokens for the embedded VLM) with one 3x5 bitmap digit drawn 4x larger
(12x20 px) at an offset and in a colour drawn from a palette, on black. Every (digit, offset, colour)
combination is one example; val and train take disjoint combinations, so val accuracy measures reading
digits in unseen placements rather than recall. Rows follow what verl's geo3k preprocessing writes: a user
message holding an ``<image>`` placeholder and an ``images`` column of PNG ``{bytes, path}`` structs.

CLI: ``python -m siirl.tasks.digit_images --out DIR [--seed S --n-train N --n-val M]``
"""

from __future__ import annotations

import io
import itertools
import random
from collections.abc import Sequence
from typing import NamedTuple

import pyarrow as pa
from PIL import Image

from siirl.tasks.task_files import task_main, write_splits

DATA_SOURCE = "siirl/digit_images"
PROMPT = "<image>Digit?"
IMAGE_SIZE = 28
SCALE = 4
# 3 columns x 5 rows per digit, top row first ("#" = lit pixel).
FONT = {
    0: ("###", "#.#", "#.#", "#.#", "###"),
    1: (".#.", "##.", ".#.", ".#.", "###"),
    2: ("###", "..#", "###", "#..", "###"),
    3: ("###", "..#", "###", "..#", "###"),
    4: ("#.#", "#.#", "###", "..#", "..#"),
    5: ("###", "#..", "###", "..#", "###"),
    6: ("###", "#..", "###", "#.#", "###"),
    7: ("###", "..#", "..#", "..#", "..#"),
    8: ("###", "#.#", "###", "#.#", "###"),
    9: ("###", "#.#", "###", "..#", "###"),
}
GLYPH_WIDTH, GLYPH_HEIGHT = 3 * SCALE, 5 * SCALE
PALETTE = (
    (255, 255, 255),
    (255, 64, 64),
    (64, 255, 64),
    (64, 128, 255),
    (255, 255, 64),
    (64, 255, 255),
    (255, 64, 255),
    (255, 160, 32),
)
NUM_EXAMPLES = len(FONT) * (IMAGE_SIZE - GLYPH_WIDTH + 1) * (IMAGE_SIZE - GLYPH_HEIGHT + 1) * len(PALETTE)
DEFAULT_N_VAL = 1024
DEFAULT_N_TRAIN = NUM_EXAMPLES - DEFAULT_N_VAL

SCHEMA = pa.schema(
    [
        ("data_source", pa.string()),
        ("prompt", pa.list_(pa.struct([("role", pa.string()), ("content", pa.string())]))),
        ("images", pa.list_(pa.struct([("bytes", pa.binary()), ("path", pa.string())]))),
        ("ability", pa.string()),
        ("reward_model", pa.struct([("style", pa.string()), ("ground_truth", pa.string())])),
        (
            "extra_info",
            pa.struct(
                [
                    ("split", pa.string()),
                    ("index", pa.int64()),
                    ("digit", pa.int64()),
                    ("x", pa.int64()),
                    ("y", pa.int64()),
                    ("colour", pa.int64()),
                ]
            ),
        ),
    ]
)


class DigitExample(NamedTuple):
    """One image's content: which digit, its top-left corner, and its palette index."""

    digit: int
    x: int
    y: int
    colour: int


def render(example: DigitExample) -> Image.Image:
    """The 28x28 RGB image of ``example``."""
    image = Image.new("RGB", (IMAGE_SIZE, IMAGE_SIZE))
    pixels = image.load()
    for row, line in enumerate(FONT[example.digit]):
        for col, cell in enumerate(line):
            if cell != "#":
                continue
            for dy, dx in itertools.product(range(SCALE), range(SCALE)):
                pixels[example.x + col * SCALE + dx, example.y + row * SCALE + dy] = PALETTE[example.colour]
    return image


def png_bytes(image: Image.Image) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


def split_examples(seed: int, n_train: int, n_val: int) -> tuple[list[DigitExample], list[DigitExample]]:
    """Disjoint (train, val) draws without replacement from all (digit, offset, colour) combinations."""
    if n_train < 0 or n_val < 0:
        raise ValueError(f"n_train and n_val must be >= 0, got n_train={n_train}, n_val={n_val}")
    if n_train + n_val > NUM_EXAMPLES:
        raise ValueError(f"n_train + n_val = {n_train + n_val} exceeds the {NUM_EXAMPLES} distinct images")
    examples = [
        DigitExample(*combo)
        for combo in itertools.product(
            sorted(FONT),
            range(IMAGE_SIZE - GLYPH_WIDTH + 1),
            range(IMAGE_SIZE - GLYPH_HEIGHT + 1),
            range(len(PALETTE)),
        )
    ]
    random.Random(seed).shuffle(examples)
    return examples[n_val : n_val + n_train], examples[:n_val]


def make_row(example: DigitExample, split: str, index: int) -> dict:
    """One verl-format record: the prompt, its image and the digit as ground truth."""
    return {
        "data_source": DATA_SOURCE,
        "prompt": [{"role": "user", "content": PROMPT}],
        "images": [{"bytes": png_bytes(render(example)), "path": None}],
        "ability": "vision",
        "reward_model": {"style": "rule", "ground_truth": str(example.digit)},
        "extra_info": {"split": split, "index": index, **example._asdict()},
    }


def generate(
    out_dir: str, seed: int = 0, n_train: int = DEFAULT_N_TRAIN, n_val: int = DEFAULT_N_VAL
) -> tuple[str, str]:
    """Write ``train.parquet`` and ``val.parquet`` into ``out_dir``; returns their paths."""
    train, val = split_examples(seed, n_train, n_val)
    return write_splits(out_dir, {"train": train, "val": val}, make_row, SCHEMA)


def main(argv: Sequence[str] | None = None) -> None:
    task_main("Generate the digit-reading image task as verl parquet.", generate, DEFAULT_N_TRAIN, DEFAULT_N_VAL, argv)


if __name__ == "__main__":
    main()
