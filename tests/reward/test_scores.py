"""Rule-based score functions: arithmetic exact match, GSM8K extraction, boxed answers, the registry."""

import pytest

from siirl.reward_score import SCORES, default_compute_score
from siirl.reward_score.arithmetic import compute_score as arith_score
from siirl.reward_score.gsm8k import compute_score as gsm8k_score
from siirl.reward_score.gsm8k import extract_solution, normalize_number
from siirl.reward_score.math_boxed import compute_score as boxed_score
from siirl.reward_score.math_boxed import last_boxed_content, normalize_answer


@pytest.mark.parametrize(
    ("solution", "truth", "expected"),
    [
        ("46", "46", 1.0),
        (" 46\n", "46", 1.0),
        ("046", "46", 1.0),
        ("45", "46", 0.0),
        ("46 apples", "46", 0.0),
        ("", "46", 0.0),
        ("4 6", "46", 0.0),
        ("-3", "-3", 1.0),
        ("198", "198", 1.0),
    ],
)
def test_arithmetic_exact_match(solution, truth, expected):
    assert arith_score(solution, truth) == expected


def test_arithmetic_bad_ground_truth():
    with pytest.raises(ValueError, match="ground_truth must be an integer"):
        arith_score("1", "one")


@pytest.mark.parametrize(
    ("text", "method", "expected"),
    [
        ("She pays 3 * 4 = 12 dollars.\n#### 12", "strict", "12"),
        ("#### 1,000", "strict", "1000"),
        ("#### $1,234.50", "strict", "1234.5"),
        ("#### -7", "strict", "-7"),
        ("####18.00", "strict", "18"),
        ("first #### 3 then #### 5", "strict", "5"),
        ("the answer is 12", "strict", None),
        ("the answer is 12", "flexible", "12"),
        ("costs $1,000.", "flexible", "1000"),
        ("from 3 to 4 then 0.50", "flexible", "0.5"),
        ("no digits here", "flexible", None),
        ("#### 5\nbut later 9", "flexible", "9"),
        ("#### .5", "strict", "0.5"),
    ],
)
def test_gsm8k_extraction(text, method, expected):
    assert extract_solution(text, method) == expected


@pytest.mark.parametrize(
    ("raw", "norm"),
    [("1,000", "1000"), ("18.00", "18"), ("$5.", "5"), ("0.50", "0.5"), ("-0", "0"), ("abc", "abc")],
)
def test_gsm8k_number_normalisation(raw, norm):
    assert normalize_number(raw) == norm


def test_gsm8k_scores_and_modes():
    assert gsm8k_score("so #### 1,000", "1000") == 1.0
    assert gsm8k_score("so 1000", "1000") == 0.0
    assert gsm8k_score("so 1000", "1000", method="flexible") == 1.0
    assert gsm8k_score("#### 7", "8", format_score=0.1) == 0.1
    assert gsm8k_score("nothing", "8", format_score=0.1) == 0.0
    with pytest.raises(ValueError, match="gsm8k method"):
        extract_solution("#### 1", "lenient")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (r"so \boxed{42}", "42"),
        (r"\boxed{\frac{1}{2}}", r"\frac{1}{2}"),
        (r"first \boxed{1} then \boxed{2}", "2"),
        (r"\fbox{x^{2}+1}", "x^{2}+1"),
        (r"\boxed{1} and finally \fbox{3}", "3"),
        (r"\boxed{\{1,2\}}", r"\{1,2\}"),
        (r"\boxed 5$", "5"),
        (r"\boxed {7}", "7"),
        (r"\boxed{unclosed", None),
        (r"no box at all", None),
        (r"\boxedfoo{3}", None),
        (r"$\boxed{\sqrt{2}}$.", r"\sqrt{2}"),
    ],
)
def test_last_boxed_content(text, expected):
    assert last_boxed_content(text) == expected


@pytest.mark.parametrize(
    ("raw", "norm"),
    [
        (r"\dfrac{1}{2}", r"\frac{1}{2}"),
        (r"\tfrac12", r"\frac12"),
        (r"\left( 1, 2 \right)", "(1,2)"),
        ("3.", "3"),
        ("$x$", "x"),
        (r"a \! b", "ab"),
    ],
)
def test_boxed_normalisation(raw, norm):
    assert normalize_answer(raw) == norm


def test_boxed_scores():
    assert boxed_score(r"thus \boxed{\dfrac{1}{2}}.", r"\frac{1}{2}") == 1.0
    assert boxed_score(r"\boxed{\left(1,2\right)}", "(1, 2)") == 1.0
    assert boxed_score(r"\boxed{3}", r"The answer is $\boxed{3}$.") == 1.0
    assert boxed_score(r"\boxed{4}", "3") == 0.0
    assert boxed_score("3", "3") == 0.0


@pytest.mark.parametrize(
    "response, expected",
    [
        (r"<think>a right angle</think> so \boxed{90}", 1.0),  # correct and well-formed
        (r"the angle is \boxed{90}", 0.9),  # correct, no reasoning block
        (r"<think>guess</think> \boxed{45}", 0.1),  # well-formed, wrong
        (r"<think>\boxed{90}</think>", 0.9),  # the box must follow the reasoning
        ("90", 0.0),  # an unboxed answer is not read
    ],
)
def test_geometry3k_scores_answer_and_format(response, expected):
    assert default_compute_score("hiyouga/geometry3k", response, "90") == pytest.approx(expected)


def test_default_compute_score_dispatch():
    assert default_compute_score("siirl/arith_add", "46", "46") == 1.0
    assert default_compute_score("siirl/digit_images", " 7\n", "7") == 1.0
    assert default_compute_score("siirl/digit_images", "1", "7") == 0.0
    assert default_compute_score("siirl/digit_images", "7.", "7") == 0.0
    assert default_compute_score("openai/gsm8k", "#### 46", "46") == 1.0
    assert default_compute_score("lighteval/MATH", r"\boxed{46}", "46") == 1.0
    assert default_compute_score("DigitalLearningGmbH/MATH-lighteval", r"\boxed{4}", "46") == 0.0
    with pytest.raises(
        ValueError, match=r"unknown data_source 'nope'; registered: .*siirl/arith_add.*custom_reward_function.path"
    ):
        default_compute_score("nope", "1", "1")


def test_a_data_source_takes_one_score_function():
    @SCORES.register("tests/custom_ds")
    def score(solution_str, ground_truth, extra_info=None):
        return {"score": 0.5, "acc": True}

    assert default_compute_score("tests/custom_ds", "x", "y") == {"score": 0.5, "acc": True}
    with pytest.raises(ValueError, match="data_source 'tests/custom_ds' is already registered"):
        SCORES.register("tests/custom_ds")(lambda *a: 0.0)
