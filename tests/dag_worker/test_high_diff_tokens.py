"""trainer.dump_high_diff_tokens: the largest rollout-vs-actor log-prob gaps, largest first, padding never."""

import json

import torch
from tensordict import TensorDict

from siirl.dag_worker.high_diff_tokens import dump_high_diff_tokens
from siirl.data_coordinator.tensordict_ops import set_non_tensor_list


class _Tokenizer:
    def decode(self, ids):
        return f"<{ids[0]}>"


def test_dump_orders_by_gap_and_skips_padding(tmp_path):
    batch = TensorDict({
        "responses": torch.tensor([[10, 11, 12], [20, 21, 22]]),
        "response_mask": torch.tensor([[1, 1, 0], [1, 1, 1]]),
        "rollout_log_probs": torch.tensor([[-1.0, -2.0, -9.0], [-1.0, -1.0, -1.0]]),
        "old_log_probs": torch.tensor([[-1.5, -2.0, 0.0], [-3.0, -1.1, -1.0]]),
    }, batch_size=[2])
    set_non_tensor_list(batch, "uid", ["a", "b"])
    dump_high_diff_tokens(batch, _Tokenizer(), tmp_path, step=3, rank=1)
    rows = [json.loads(line) for line in (tmp_path / "step_3_rank_1.jsonl").read_text().splitlines()]
    assert [(r["uid"], r["position"], r["token"]) for r in rows[:3]] == [("b", 0, "<20>"), ("a", 0, "<10>"), ("b", 1, "<21>")]
    assert rows[0]["abs_diff"] == 2.0 and rows[0]["step"] == 3 and rows[0]["row"] == 1
    assert len(rows) == 5 and all(r["token_id"] != 12 for r in rows)  # the padded token (gap 9) never shows
