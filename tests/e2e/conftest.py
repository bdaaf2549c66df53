"""End-to-end runs of ``siirl.main_dag`` on the embedded model, on the session's Ray and warm workers
(``ray_session`` in tests/conftest.py)."""

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
