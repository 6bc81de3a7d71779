"""The reproducible actor-learner mode on the main Atari conf: two runs of
confs/impala_atari.gin with ``TrainerConfig.deterministic=True`` and the same seed, each for
the first 300 iterations (96,000 agent steps), must write the same TensorBoard scalars (all
but ``time/*``); a free-running pair is printed beside it for contrast.

    python bench/deterministic_atari.py [--iterations 300] [--summary_interval 10]
        [--no_free_running] [--conf_param ...]
"""

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rlf.utils.tensorboard_reader import read_scalar_tags


def scalars(root: Path) -> dict:
    """``{tag: [(step, value), ...]}`` of a run's ``train/`` events, ``time/*`` left out."""
    return {t: list(zip(steps, values))
            for t, (steps, values, _) in read_scalar_tags(root / "train").items()
            if not t.startswith("time/")}


def run(root: Path, params) -> float:
    """Trains the main conf in ``root`` with ``params``; returns the wall seconds."""
    cmd = [sys.executable, "-m", "rlf.bin.train", "--conf", "confs/impala_atari.gin",
           "--root_dir", str(root), "--noprogress"]
    for p in params:
        cmd += ["--conf_param", p]
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    return time.perf_counter() - t0


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--iterations", type=int, default=300)
    p.add_argument("--summary_interval", type=int, default=10)
    p.add_argument("--no_free_running", action="store_true")
    p.add_argument("--conf_param", action="append", default=[])
    args = p.parse_args()
    common = [f"TrainerConfig.num_iterations={args.iterations}", "TrainerConfig.num_env_steps=0",
              f"TrainerConfig.summary_interval={args.summary_interval}"] + args.conf_param
    modes = [("deterministic", ["TrainerConfig.deterministic=True"])]
    if not args.no_free_running:
        modes.append(("free-running", ["TrainerConfig.deterministic=False"]))
    with tempfile.TemporaryDirectory() as tmp:
        for name, params in modes:
            runs = []
            for r in ("a", "b"):
                seconds = run(Path(tmp) / f"{name}-{r}", common + params)
                runs.append(scalars(Path(tmp) / f"{name}-{r}"))
                print(f"{name} run {r}: {seconds / 60:.1f} min", flush=True)
            a, b = runs
            differ = sorted(t for t in set(a) | set(b) if a.get(t) != b.get(t))
            print(f"{name}: {len(a)} tags, {len(differ)} differ over {args.iterations} "
                  f"iterations{': ' + ', '.join(differ[:6]) if differ else ''}"
                  + ("" if name != "deterministic" else
                     f" ({'met' if not differ else 'NOT met'})"), flush=True)


if __name__ == "__main__":
    main()
