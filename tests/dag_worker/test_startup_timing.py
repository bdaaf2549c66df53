"""Start-up phases: each is the time since the previous mark present, and they add up to the total."""

from __future__ import annotations

import time

import pytest

from siirl import startup_timing
from siirl.startup_timing import PREFIX, TOTAL, phase_seconds


def test_phases_are_differences_of_consecutive_marks_and_add_up():
    marks = {"validation": 20.0, "launch": 0.0, "interpreter": 0.5, "ray": 9.0, "models": 17.5}
    phases = phase_seconds(marks)
    assert phases == {
        f"{PREFIX}interpreter": 0.5, f"{PREFIX}ray": 8.5, f"{PREFIX}models": 8.5, f"{PREFIX}validation": 2.5,
        TOTAL: 20.0,
    }
    assert sum(v for k, v in phases.items() if k != TOTAL) == pytest.approx(phases[TOTAL])


def test_too_few_marks_give_no_phases():
    assert phase_seconds({}) == {} and phase_seconds({"ray": 1.0}) == {}


def test_launcher_marks_start_at_process_creation_and_are_taken_once(monkeypatch):
    monkeypatch.setattr(startup_timing, "_FIRST_LAUNCH", True)
    startup_timing.launcher_started()
    startup_timing.mark("imports")
    marks = startup_timing.take_launcher_marks()
    assert list(marks) == ["launch", "interpreter", "imports"]
    assert marks["launch"] <= marks["interpreter"] <= marks["imports"] <= time.time()
    assert time.time() - marks["launch"] < 24 * 3600  # this process, not the machine's boot
    assert startup_timing.take_launcher_marks() == {}


def test_a_later_job_of_the_same_process_starts_at_its_own_launch(monkeypatch):
    monkeypatch.setattr(startup_timing, "_FIRST_LAUNCH", True)
    startup_timing.launcher_started()
    startup_timing.take_launcher_marks()
    startup_timing.launcher_started()
    assert list(startup_timing.take_launcher_marks()) == ["interpreter"]
