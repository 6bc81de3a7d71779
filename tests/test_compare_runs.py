"""rlf.bin.compare on plain runs: groups of run directories by glob, each run's final metric,
the groups' means with bootstrap intervals over runs, P(variant > baseline) against a
hand-computed value, the learning curves' plot, and one-line mistakes."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("rliable")
from torch.utils.tensorboard import SummaryWriter  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
TAG = "Metrics_vs_EnvironmentSteps/AverageReturn"


def _run(root: Path, curve) -> None:
    """A run directory whose TensorBoard events hold ``curve`` (``[(env_steps, return)]``)."""
    writer = SummaryWriter(str(root / "train"))
    for step, value in curve:
        writer.add_scalar(TAG, value, step)
    writer.close()


def _compare(*args, cwd=REPO):
    return subprocess.run([sys.executable, "-m", "rlf.bin.compare", "--reps", "500", *args],
                          cwd=cwd, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(REPO)})


def test_groups_of_runs_are_compared_by_their_final_metric(tmp_path):
    # baseline seeds end at 10 and 20, the variant's at 15 and 30: of the 4 pairs the
    # variant wins (15 > 10), (30 > 10), (30 > 20) and loses (15 < 20): P = 3/4.
    for seed, (a, b) in enumerate([(10.0, 15.0), (20.0, 30.0)]):
        _run(tmp_path / f"base_seed{seed}", [(100, 1.0), (200, a / 2), (300, a)])
        _run(tmp_path / f"var_seed{seed}", [(100, 2.0), (200, b / 2), (320, b)])
    r = _compare("--baseline", str(tmp_path / "base_seed*"), "--variant",
                 str(tmp_path / "var_seed*"), "--out", str(tmp_path / "out"))
    assert r.returncode == 0, r.stderr[-2000:]
    rows = {m.group(1): m.groups()[1:] for m in re.finditer(
        r"^\| (\S+) \| (\d) \| ([\d.]+) \[[\d.]+, [\d.]+\] \| ([\d.]*)", r.stdout, re.M)}
    base, var = str(tmp_path / "base_seed*"), str(tmp_path / "var_seed*")
    assert rows[base][:2] == ("2", "15.00") and rows[var][:2] == ("2", "22.50")
    assert rows[var][2] == "0.75"
    assert "final Metrics/AverageReturn" in r.stdout
    assert (tmp_path / "out" / "compare.md").read_text() in r.stdout
    assert (tmp_path / "out" / "learning_curves.png").read_bytes()[:4] == b"\x89PNG"
    # two run directories: a group of one each, whose interval would have zero width
    work = tmp_path / "work"
    work.mkdir()
    r = _compare(str(tmp_path / "base_seed0"), str(tmp_path / "var_seed1"), cwd=work)
    assert r.returncode == 0 and "| 10.00 (one run: no interval) |" in r.stdout
    assert "| 1.00 (no interval) |" in r.stdout and "[" not in r.stdout.split("|---|")[-1]
    assert "An interval over runs needs at least two runs per group" in r.stdout
    # without --out, compare/ in the current directory; nothing written into a run
    assert (work / "compare" / "compare.md").is_file()
    assert sorted(p.name for p in (tmp_path / "base_seed0").iterdir()) == ["train"]
    # --out that is a file: one line, the file kept
    (tmp_path / "a_file").write_text("mine")
    r = _compare(str(tmp_path / "base_seed0"), str(tmp_path / "var_seed1"), "--out",
                 str(tmp_path / "a_file"))
    assert r.returncode == 2 and r.stderr.strip().splitlines() == [
        f"error: --out {tmp_path / 'a_file'} is a file, not a directory; pass a directory"]
    assert (tmp_path / "a_file").read_text() == "mine"


@pytest.mark.parametrize("args, message", [
    (["--baseline", "NOWHERE*", "--variant", "NOWHERE2*"], "'NOWHERE*' names no run directory"),
    (["--baseline", "X"], "--baseline and --variant go together"),
    (["--metric", "Eval/AverageReturn", "RUN", "RUN2"], "wrote no Eval/AverageReturn summary"),
    (["NOPE", "RUN"], "NOPE: no such directory; give finished suites' or runs' directories"),
])
def test_mistakes_are_one_line(tmp_path, args, message):
    _run(tmp_path / "RUN", [(10, 1.0)])
    _run(tmp_path / "RUN2", [(10, 2.0)])
    args = [str(tmp_path / a) if a.startswith("RUN") else a for a in args]
    r = _compare(*args)
    assert r.returncode == 2
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and message in lines[0], r.stderr
