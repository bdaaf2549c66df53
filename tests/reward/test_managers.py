"""Sequential reward managers (naive, batch, dapo), score placement and the batch-field helpers."""

import pytest
import torch
from tensordict import TensorDict

from siirl.config_checks import load_config
from siirl.engine.reward import make_reward_manager
from siirl.engine.reward.batch_fields import get_ground_truths, get_list, get_str_list, set_list
from siirl.engine.reward.dapo import overlong_penalty
from siirl.errors import ConfigError
from tests.reward.helpers import TOKENIZER, make_batch
from tests.reward.reward_fns import batch_score


def test_naive_scores_on_last_valid_token():
    batch = make_batch(["46", "12", "100"], ["46", "13", "100"])
    scores, extra = make_reward_manager("naive", TOKENIZER)(batch)
    assert scores.shape == batch["responses"].shape and scores.dtype == torch.float32
    assert extra["score"] == [1.0, 0.0, 1.0]
    last = batch["response_mask"].sum(-1) - 1  # the EOS position
    assert scores[torch.arange(3), last].tolist() == [1.0, 0.0, 1.0]
    assert scores.sum().item() == 2.0


def test_tokenizer_given_at_call_time_and_missing():
    batch = make_batch(["7"], ["7"])
    scores, _ = make_reward_manager("naive")(batch, TOKENIZER)
    assert scores.sum().item() == 1.0
    with pytest.raises(ValueError, match="needs a tokenizer"):
        make_reward_manager("naive")(batch)


def test_empty_response_gets_no_token_score():
    batch = make_batch(["5", "5"], ["5", "5"])
    batch["response_mask"][1] = 0
    scores, extra = make_reward_manager("naive", TOKENIZER)(batch)
    assert scores[0].sum().item() == 1.0 and scores[1].abs().sum().item() == 0.0
    assert len(extra["score"]) == 2


def test_dict_results_become_extra_info():
    def score(data_source, solution_str, ground_truth, extra_info=None):
        return {"score": 0.5, "acc": solution_str == ground_truth}

    _, extra = make_reward_manager("naive", TOKENIZER, compute_score=score)(
        make_batch(["1", "2"], ["1", "1"])
    )
    assert extra == {"score": [0.5, 0.5], "acc": [True, False]}


def test_numeric_scores_are_the_accuracy():
    _, extra = make_reward_manager("naive", TOKENIZER)(make_batch(["1", "2"], ["1", "1"]))
    assert extra == {"score": [1.0, 0.0], "acc": [1.0, 0.0]}


@pytest.mark.parametrize("bad", [{"acc": 1.0}, "high", None])
def test_bad_score_values_are_named(bad):
    manager = make_reward_manager("naive", TOKENIZER, compute_score=lambda *a: bad)
    with pytest.raises(ValueError, match="score function for 'siirl/arith_add'"):
        manager(make_batch(["1"], ["1"]))


def test_batch_manager_calls_once_with_lists():
    batch = make_batch(["3", "4", "5"], ["3", "3", "5"])
    scores, extra = make_reward_manager("batch", TOKENIZER, compute_score=batch_score)(batch)
    assert extra["score"] == [1.0, 0.0, 1.0]
    assert extra["n_in_call"] == [3, 3, 3]
    default_scores, _ = make_reward_manager("batch", TOKENIZER)(batch)
    assert torch.equal(scores, default_scores)


def test_batch_manager_rejects_wrong_length():
    manager = make_reward_manager("batch", TOKENIZER, compute_score=lambda **kw: [1.0])
    with pytest.raises(ValueError, match="produced 1 scores for 2 samples"):
        manager(make_batch(["1", "2"], ["1", "2"]))


@pytest.mark.parametrize(("length", "expected"), [(3, 0.0), (6, 0.0), (7, -0.25), (8, -0.5), (10, -1.0)])
def test_overlong_penalty_values(length, expected):
    assert overlong_penalty(
        length, max_response_length=10, overlong_buffer_len=4, factor=1.0
    ) == pytest.approx(expected)


def test_dapo_manager_applies_penalty_by_response_length():
    # Responses of 2, 8 and 10 valid tokens (digits + EOS) with max length 10 and a buffer of 4.
    batch = make_batch(["1", "1234567", "123456789"], ["1", "1234567", "0"], width=10)
    manager = make_reward_manager(
        "dapo", TOKENIZER, max_response_length=10, overlong_buffer_len=4, penalty_factor=0.5
    )
    scores, extra = manager(batch)
    assert extra["overlong_reward"] == pytest.approx([0.0, -0.25, -0.5])
    assert extra["overlong"] == [False, True, True]
    assert extra["score"] == extra["acc"] == [1.0, 1.0, 0.0]  # the score function's, as in verl
    assert scores.sum(-1).tolist() == pytest.approx([1.0, 0.75, -0.5])
    _, extra = make_reward_manager("dapo", TOKENIZER)(batch)
    assert extra["score"] == [1.0, 1.0, 0.0] and "overlong_reward" not in extra


@pytest.mark.parametrize(
    ("overrides", "match"),
    [
        (["reward_model.overlong_buffer.len=4"], r"overlong_buffer.len=4 must be in \(0, data.max_response_length=4\)"),
        (["reward_model.overlong_buffer.len=-1"], r"overlong_buffer.len=-1 must be in \(0, "),
        (["reward_model.overlong_buffer.penalty_factor=-1"], "penalty_factor=-1.0 is invalid; expected >= 0"),
    ],
)
def test_dapo_bad_options_are_refused_before_ray(overrides, match):
    dapo = ["reward_model.reward_manager=dapo", "reward_model.overlong_buffer.enable=true", "data.max_response_length=4"]
    with pytest.raises(ConfigError, match=match):
        load_config([*dapo, *overrides])


def test_factory_errors():
    with pytest.raises(ConfigError, match=r"unknown reward manager 'fancy'; registered: batch, dapo, .*naive, parallel"):
        make_reward_manager("fancy", TOKENIZER)
    with pytest.raises(ValueError, match=r"unknown options: \['colour'\]"):
        make_reward_manager("naive", TOKENIZER, colour="red")


def test_batch_fields_storage_forms():
    td = TensorDict({"x": torch.zeros(3, 2)}, batch_size=[3])
    set_list(td, "per_sample", ["a", "b", "c"])
    td.set_non_tensor("shared_list", ["d", "e", "f"])
    td.set_non_tensor("broadcast", "g")
    set_list(td, "extra_info", [{"i": 0}, {"i": 1}, {"i": 2}])
    assert get_str_list(td, "per_sample") == ["a", "b", "c"]
    assert get_str_list(td, "shared_list") == ["d", "e", "f"]
    assert get_str_list(td, "broadcast") == ["g", "g", "g"]
    assert get_list(td, "extra_info") == [{"i": 0}, {"i": 1}, {"i": 2}]
    assert get_list(td, "absent", None) == [None, None, None]
    sub = td[torch.tensor([2, 0])]
    assert get_str_list(sub, "per_sample") == ["c", "a"]
    assert get_list(sub, "extra_info") == [{"i": 2}, {"i": 0}]


def test_batch_fields_errors_and_verl_ground_truth():
    td = TensorDict({"x": torch.zeros(2, 1)}, batch_size=[2])
    with pytest.raises(ValueError, match="batch has no field 'data_source'"):
        get_str_list(td, "data_source")
    with pytest.raises(ValueError, match="has 3 values for a batch of 2"):
        set_list(td, "y", [1, 2, 3])
    td.set_non_tensor("shared_list", ["a", "b", "c"])  # not one per row: one value shared by both rows
    assert get_list(td, "shared_list") == [["a", "b", "c"]] * 2
    with pytest.raises(ValueError, match="neither 'ground_truth' nor 'reward_model'"):
        get_ground_truths(td)
    set_list(
        td, "reward_model", [{"style": "rule", "ground_truth": "4"}, {"style": "rule", "ground_truth": 5}]
    )
    assert get_ground_truths(td) == ["4", "5"]
    with pytest.raises(ValueError, match="no batch dimension"):
        get_list(TensorDict({}, batch_size=[]), "x")
