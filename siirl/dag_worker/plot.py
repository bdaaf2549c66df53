"""End-of-run picture: training reward, validation score and (agentic runs) success rates per step."""

from __future__ import annotations

import json
from pathlib import Path

from siirl.dag_worker.run_files import MATPLOTLIB_FOLDERS, files_under

#: Curves drawn when the run logged them: rewards, validation, environment / team success rates.
CURVES = (
    "reward/mean",
    "val/score",
    "embodied_sampling/success_rate",
    "env/success_rate",
    "team/final_accuracy",
    "val/success_rate",
)


def plot_run(run_dir: Path, out_name: str = "reward_curve.png") -> Path | None:
    """Write ``reward_curve.png`` next to metrics.jsonl; None when there is nothing to plot."""
    metrics_file = run_dir / "metrics.jsonl"
    if not metrics_file.is_file():
        return None
    # The object API, not pyplot: the same picture for about half the import time, at the end of every run.
    with files_under(run_dir / ".cache", MATPLOTLIB_FOLDERS):  # its font cache, not in $HOME
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure

    rows = [json.loads(line) for line in metrics_file.read_text(encoding="utf-8").splitlines() if line.strip()]
    series = {
        key: [(r["step"], r[key]) for r in rows if key in r] for key in CURVES
    }
    if not any(series.values()):
        return None
    fig = Figure(figsize=(7, 4))
    FigureCanvasAgg(fig)
    ax = fig.subplots()
    for key, points in series.items():
        if points:
            steps, values = zip(*points)
            ax.plot(steps, values, marker="o" if key == "val/score" else None, label=key)
    ax.set_xlabel("step")
    ax.set_ylabel("score")
    ax.set_title(run_dir.name)
    ax.grid(alpha=0.3)
    ax.legend()
    path = run_dir / out_name
    fig.savefig(path, dpi=100, bbox_inches="tight")
    return path
