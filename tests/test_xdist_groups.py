"""Tests marked ``xdist_group`` share one process (their module fixtures: a Ray cluster, a bundle of trainings).
pytest-xdist keeps a group together by adding the group to each test's id; with a pytest that stores ids
elsewhere (pytest 9) the tag is lost and ``--dist loadgroup`` spreads the group over every process."""

import pytest


@pytest.mark.xdist_group("xdist_group_probe")
def test_the_group_is_in_the_test_id_the_scheduler_reads(request):
    if getattr(request.config.option, "loadgroup", False):  # a worker of `--dist loadgroup`
        assert request.node.nodeid.endswith("@xdist_group_probe"), request.node.nodeid
    else:  # one process: the pinned pytest is one whose ids xdist can tag
        assert int(pytest.__version__.split(".")[0]) < 9, pytest.__version__
