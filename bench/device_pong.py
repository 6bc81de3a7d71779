"""Pong with ``confs/impala_atari_gpu.gin`` for a fixed wall time: the frames reached and the
score (``AverageEpisodeScore``, the last 100 episodes) against wall time, read back from
TensorBoard.

    python bench/device_pong.py [--minutes 8] [--root_dir runs/gpu_pong] [--conf_param ...]

The run gets SIGTERM at ``--minutes`` (it writes a checkpoint and stops), so the command
ends within about a minute of it. Without a GPU: ``--conf_param "TrainerConfig.device='cpu'"``.
"""

import argparse
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rlf.utils.tensorboard_reader import read_scalar_tags

SCORE = "Metrics_vs_EnvironmentSteps/AverageEpisodeScore"


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--conf", default="confs/impala_atari_gpu.gin")
    p.add_argument("--minutes", type=float, default=8.0)
    p.add_argument("--root_dir", default=None, help="keep the run here")
    p.add_argument("--conf_param", action="append", default=[])
    args = p.parse_args()
    root = Path(args.root_dir or tempfile.mkdtemp(prefix="rlf_device_pong_"))
    cmd = [sys.executable, "-m", "rlf.bin.train", "--conf", args.conf, "--root_dir", str(root),
           "--noprogress"]
    for param in args.conf_param:
        cmd += ["--conf_param", param]
    t0 = time.time()
    run = subprocess.Popen(cmd)
    try:
        run.wait(timeout=60 * args.minutes)
    except subprocess.TimeoutExpired:
        run.send_signal(signal.SIGTERM)  # the trainer checkpoints and stops
        run.wait()
    wall = time.time() - t0
    steps, scores, times = read_scalar_tags(root / "train", [SCORE])[SCORE]
    print(f"{args.conf}: {wall / 60:.1f} min, exit status {run.returncode}")
    print(f"{'minutes':>8} {'frames':>12} {'score':>7}")
    for s, v, w in zip(steps, scores, times):
        print(f"{(w - t0) / 60:>8.2f} {4 * s:>12,} {v:>7.2f}")
    if steps:
        print(f"reached {4 * steps[-1]:,} frames; score {scores[-1]:.2f} (last 100 episodes)")
    else:
        print("no score yet: no episode ended")
    return run.returncode


if __name__ == "__main__":
    sys.exit(main())
