"""``bench/device_checks.py --smoke``: the device script runs every part on the CPU and
writes its report (only where asked), so that it is known to work before GPU time is spent on
it."""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_device_checks_run_in_smoke_mode(tmp_path):
    out = tmp_path / "report.json"
    done = subprocess.run([sys.executable, "bench/device_checks.py", "--smoke", "--out",
                           str(out)], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    report = json.loads(out.read_text())
    assert report["tests"]["failed"] == 0 and report["tests"]["passed"] >= 10
    assert {(r["encoder"], r["precision"]) for r in report["learner"]} == {
        (e, p) for e in ("ShallowCNN", "NatureCNN", "ImpalaCNN") for p in ("float32", "amp")}
    assert all(r["samples_per_s"] > 0 for r in report["learner"])
    (row,) = report["end_to_end"]
    assert row["num_actors"] == 1 and row["agent_steps_per_s"] > 0
    assert 0.0 <= row["learner_idle"] <= 1.0 and row["policy_lag"] >= 0
    assert "end to end" in done.stdout and "learner alone" in done.stdout


def test_the_smoke_mode_writes_nothing_unasked(tmp_path):
    # Without --out, --smoke prints its tables and leaves the current directory alone.
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "device_checks.py"), "--smoke",
                           "--skip", "tests", "learner", "e2e"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "report:" not in done.stdout and list(tmp_path.iterdir()) == []
