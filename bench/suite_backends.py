"""The same suite on both backends: ``rlf.bin.suite --backend sequential`` (one run after
another) against ``--backend tune`` (parallel Ray Tune trials), two games and two seeds of
confs/impala_atari_sync.gin with one torch thread and one ALE thread per run, so that two
trials share two cores without oversubscribing them. Prints each backend's wall time and
score table; the runs of a backend are its ``--root_dir``'s.

    python bench/suite_backends.py [--games Pong Breakout] [--seeds 0 1] [--frames 200k] \
        [--max_concurrent 2] [--root_dir runs/suite_backends]
"""

import argparse
import subprocess
import sys
import time
from pathlib import Path

SINGLE_THREADED = ["TrainerConfig.torch_num_threads=1", "load_atari.num_threads=1",
                   "TrainerConfig.evaluate=False"]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--games", nargs="+", default=["Pong", "Breakout"])
    p.add_argument("--seeds", nargs="+", default=["0", "1"])
    p.add_argument("--frames", default="200k")
    p.add_argument("--max_concurrent", default="2")
    p.add_argument("--root_dir", default="runs/suite_backends")
    args = p.parse_args()
    walls = {}
    for backend in ("sequential", "tune"):
        root = Path(args.root_dir) / backend
        cmd = [sys.executable, "-m", "rlf.bin.suite", "--conf", "confs/impala_atari_sync.gin",
               "--games", ",".join(args.games), "--seeds", ",".join(args.seeds),
               "--frames", args.frames, "--root_dir", str(root), "--backend", backend]
        if backend == "tune":
            cmd += ["--max_concurrent", args.max_concurrent]
        for b in SINGLE_THREADED:
            cmd += ["--conf_param", b]
        print(" ".join(cmd[1:]), flush=True)
        t0 = time.time()
        r = subprocess.run(cmd, capture_output=True, text=True)
        walls[backend] = time.time() - t0
        if r.returncode:
            print(r.stdout[-3000:], r.stderr[-3000:])
            return r.returncode
        print((root / "results.md").read_text(), flush=True)
    for backend, wall in walls.items():
        print(f"{backend}: {wall / 60:.1f} min for {len(args.games) * len(args.seeds)} runs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
