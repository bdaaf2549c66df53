"""The collector pauses while a process starts and resumes after, with what start-up built frozen."""

from __future__ import annotations

import gc

import pytest

from siirl import startup_gc


@pytest.fixture(autouse=True)
def collector_restored():
    yield
    startup_gc.settle()
    gc.enable()
    gc.unfreeze()  # this test process keeps collecting what it froze


def test_a_paused_block_freezes_what_it_built_then_collects_again():
    frozen = gc.get_freeze_count()
    with startup_gc.collector_paused():
        assert not gc.isenabled()
        built = [[i] for i in range(1000)]
    assert gc.isenabled()
    assert gc.get_freeze_count() >= frozen + len(built)


def test_inside_a_pause_a_block_leaves_the_collector_to_the_pause_owner():
    startup_gc.pause()
    with startup_gc.collector_paused():
        pass
    assert not gc.isenabled()
    startup_gc.settle()
    assert gc.isenabled()


def test_settle_without_a_pause_changes_nothing():
    frozen = gc.get_freeze_count()
    startup_gc.settle()
    assert gc.isenabled() and gc.get_freeze_count() == frozen
