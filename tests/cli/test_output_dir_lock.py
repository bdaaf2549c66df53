"""A second job on a running job's trainer.output_dir is refused in one line; the lock dies with its owner."""

import subprocess
import sys

import pytest

from siirl.errors import SiirlUserError
from siirl.main_dag import EXIT_USER_ERROR, main
from siirl.run_lock import output_dir_lock
from tests.ray_testutils import ray_start_attempts


def test_second_job_on_a_busy_output_dir_is_refused_before_ray(tmp_path, capsys):
    with output_dir_lock(tmp_path), ray_start_attempts() as ray_starts:
        code = main(["device=cpu", f"trainer.output_dir={tmp_path}", "trainer.total_training_steps=1"])
    err = capsys.readouterr().err.strip()
    assert code == EXIT_USER_ERROR and "\n" not in err, err
    assert f"trainer.output_dir={tmp_path} is in use by a running job" in err
    assert not ray_starts


def test_the_lock_is_exclusive_and_released_on_exit(tmp_path):
    with output_dir_lock(tmp_path), pytest.raises(SiirlUserError, match="in use"), output_dir_lock(tmp_path):
        pass
    with output_dir_lock(tmp_path):  # released by the block above
        pass


def test_a_killed_owner_leaves_no_stale_lock(tmp_path):
    script = (
        "import sys, time\nfrom siirl.run_lock import output_dir_lock\n"
        "with output_dir_lock(sys.argv[1]):\n    print('held', flush=True)\n    time.sleep(60)\n"
    )
    holder = subprocess.Popen([sys.executable, "-c", script, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    with pytest.raises(SiirlUserError, match=f"pid {holder.pid}"), output_dir_lock(tmp_path):
        pass
    holder.kill()
    holder.wait()
    with output_dir_lock(tmp_path):
        pass
