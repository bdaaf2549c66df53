"""Tests marked ``xdist_group`` share one process (their module fixtures: a Ray cluster, a bundle of trainings).
pytest-xdist keeps a group together by adding the group to each test's id; pytest 9 stores ids where xdist
(3.8) does not write, so ``tests/conftest.py`` adds the tag there. Without it ``--dist loadgroup`` spreads
every group over every process."""

import pytest


@pytest.mark.xdist_group("xdist_group_probe")
def test_the_group_is_in_the_test_id_the_scheduler_reads(request):
    if not getattr(request.config.option, "loadgroup", False):
        pytest.skip("one process (-n 0): no scheduler reads the group")
    assert request.node.nodeid.endswith("@xdist_group_probe"), request.node.nodeid
