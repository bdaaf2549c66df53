"""SIGTERM before Ray starts ends the launcher like Ctrl-C: one line, exit 130 (not a silent 143)."""

from __future__ import annotations

import subprocess
import sys

# The launcher's entry point, with config loading replaced by a stand-in that gets SIGTERM mid-way.
LAUNCH = """
import os, signal, sys, time
import siirl.config_checks

def loading(*args, **kwargs):
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(60)

siirl.config_checks.load_config = loading
sys.argv = ["siirl"]
from siirl.main_dag import cli
cli()
"""


def test_sigterm_during_config_loading_exits_130_with_one_line():
    done = subprocess.run([sys.executable, "-c", LAUNCH], check=False, capture_output=True, text=True, timeout=60)
    assert done.returncode == 130, done.stderr
    assert done.stderr.strip().splitlines()[-1].startswith("siirl: interrupted"), done.stderr
    assert "Traceback" not in done.stderr
