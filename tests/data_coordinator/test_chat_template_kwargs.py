"""``data.apply_chat_template_kwargs`` reach the tokenizer's chat template where the dataloader renders
prompts (verl passes them to ``apply_chat_template``; gpt-oss reads ``reasoning_effort`` there)."""

from __future__ import annotations

from dc_testutils import build_tokenizer, data_config

from siirl.config_checks import load_config
from siirl.data_coordinator import build_val_dataloader

#: Renders the effort (or ``none``) before the user turn, as gpt-oss's template writes it into its system turn.
TEMPLATE = (
    "{{ reasoning_effort | default('none') }}"
    "{% for m in messages %}[U]{{ m['content'] }}{% endfor %}{% if add_generation_prompt %}[A]{% endif %}"
)


def _first_prompt(tokenizer, parquet_of, **config) -> str:
    loader = build_val_dataloader(data_config(val_files=[parquet_of(2)], max_prompt_length=16, **config), tokenizer, 0, 1)
    batch = next(iter(loader))
    ids = batch["input_ids"][0][batch["attention_mask"][0].bool()]
    return tokenizer.decode(ids.tolist())


def test_kwargs_reach_the_chat_template(parquet_of):
    tokenizer = build_tokenizer()
    tokenizer.chat_template = TEMPLATE
    assert _first_prompt(tokenizer, parquet_of).startswith("none")
    rendered = _first_prompt(tokenizer, parquet_of, apply_chat_template_kwargs={"reasoning_effort": "medium"})
    assert rendered.startswith("medium") and rendered.endswith("[A]"), rendered


def test_verls_plus_key_sets_one_kwarg():
    cfg = load_config(["+data.apply_chat_template_kwargs.reasoning_effort=medium"])
    assert cfg.data.apply_chat_template_kwargs == {"reasoning_effort": "medium"}
