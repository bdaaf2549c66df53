"""Ray address parsing, the bounded probe and the capacity check, without starting Ray."""

import socket
import time

import pytest

from siirl import cluster
from siirl.errors import ClusterError


@pytest.mark.parametrize(
    ("address", "endpoint"),
    [("10.0.0.5:6379", ("10.0.0.5", 6379)), ("ray://head:10001", ("head", 10001)), ("[::1]:6379", ("::1", 6379)),
     ("auto", None), ("local", None)],
)
def test_gcs_endpoint(address, endpoint):
    assert cluster.gcs_endpoint(address) == endpoint


def test_malformed_address_is_one_line():
    with pytest.raises(ClusterError, match="trainer.ray_address='head' is not host:port"):
        cluster.gcs_endpoint("head")


def test_probe_refused_and_listening():
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        cluster.probe_address(f"127.0.0.1:{server.getsockname()[1]}", timeout_s=2)
    began = time.monotonic()
    with pytest.raises(ClusterError, match="cannot reach Ray at 127.0.0.1:1 within 2s"):
        cluster.probe_address("127.0.0.1:1", timeout_s=2)
    assert time.monotonic() - began < 5


def test_private_defaults_only_for_a_ray_we_start():
    assert cluster.ray_init_options(None, {})["include_dashboard"] is False
    assert "include_dashboard" not in cluster.ray_init_options("10.0.0.5:6379", {})


def test_capacity_sums_all_bundles(monkeypatch):
    import ray

    monkeypatch.setattr(ray, "cluster_resources", lambda: {"CPU": 4.0, "GPU": 2.0})
    cluster.check_capacity([{"CPU": 1.0, "GPU": 1.0}] * 2)
    with pytest.raises(ClusterError, match="3 DAG workers need 3 GPU but the Ray cluster has 2 in total"):
        cluster.check_capacity([{"CPU": 1.0, "GPU": 1.0}] * 3)
    with pytest.raises(ClusterError, match="need 1 NPU but the Ray cluster has 0"):
        cluster.check_capacity([{"CPU": 1.0, "NPU": 1.0}])


STUCK_CLEANUP = """
import time
from siirl.cluster import InterruptGuard
with InterruptGuard(grace_s={grace}):
    try:
        print("ready", flush=True)
        time.sleep(60)
    except KeyboardInterrupt:
        time.sleep(60)  # a cleanup that never finishes
"""


@pytest.mark.parametrize(("grace", "signals"), [(1.0, 1), (30.0, 2)])
def test_interrupt_guard_ends_a_stuck_shutdown(grace, signals):
    import os
    import signal
    import subprocess
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parents[2]
    proc = subprocess.Popen(
        [sys.executable, "-c", STUCK_CLEANUP.format(grace=grace)], cwd=repo, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(repo)},
    )
    assert proc.stdout.readline().strip() == "ready"
    began = time.monotonic()
    for _ in range(signals):
        proc.send_signal(signal.SIGINT)
        time.sleep(0.3)
    _, err = proc.communicate(timeout=20)
    assert proc.returncode == cluster.EXIT_INTERRUPTED
    assert "shutdown did not finish in time" in err
    assert time.monotonic() - began < 10


RECLAIMED = """
import os, signal
from siirl.cluster import InterruptGuard
for signum in (signal.SIGINT, signal.SIGTERM):
    with InterruptGuard() as guard:
        for taken in (signal.SIGINT, signal.SIGTERM):
            signal.signal(taken, lambda *_: os._exit(1))  # what ray.init installs in the driver
        guard.reclaim()
        try:
            os.kill(os.getpid(), signum)
        except KeyboardInterrupt:
            print(signal.Signals(signum).name, flush=True)
"""


def test_ctrl_c_and_sigterm_both_unwind_the_driver_after_ray_took_the_handlers():
    """Both signals reach the same cleanup path (KeyboardInterrupt), Ray's handlers notwithstanding; the
    whole chain (workers gone within 10 s, exit 130) is tested once, end to end, in tests/e2e/test_faults.py."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "-c", RECLAIMED], cwd=repo, capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(repo)}, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["SIGINT", "SIGTERM"]
