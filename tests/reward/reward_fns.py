"""Module-level score functions for the reward-manager tests (picklable for the process pool)."""

import os
import time

from siirl.reward_score import default_compute_score

#: Scores a broken function may return: never trained on as they are.
ODD_SCORES = {"nan": float("nan"), "inf": float("inf"), "huge": 1e300, "-huge": -1e300}


def misbehaving_batch_score(data_sources, solution_strs, ground_truths, extra_infos):
    """Batch form of ``misbehaving_score``: one sample in ``raise`` mode fails the whole call."""
    return [misbehaving_score(*args) for args in zip(data_sources, solution_strs, ground_truths, extra_infos)]


def misbehaving_score(data_source, solution_str, ground_truth, extra_info=None):
    """Behaves per ``extra_info["mode"]``: raise, hang (writing its pid first), die, slow, or score normally."""
    mode = (extra_info or {}).get("mode", "ok")
    if mode == "raise":
        raise RuntimeError("broken verifier")
    if mode == "hang":
        with open(extra_info["pid_file"], "w") as f:
            f.write(str(os.getpid()))
        time.sleep(600)
    if mode == "die":
        os._exit(3)
    if mode == "slow":
        time.sleep(0.5)
    if mode in ODD_SCORES:
        return ODD_SCORES[mode]
    return default_compute_score(data_source, solution_str, ground_truth, extra_info)


def batch_score(data_sources, solution_strs, ground_truths, extra_infos):
    """Batch function: records how it was called so the test can check it ran once with lists."""
    return [
        {"score": float(s.strip() == g), "n_in_call": len(solution_strs)}
        for s, g in zip(solution_strs, ground_truths)
    ]
