"""Shared by the learning benchmarks (``bench/*_learning.py``): train a conf once per seed as
``rlf.bin.train`` does, and read its curves back from TensorBoard's event files.

Not a benchmark itself; the scripts beside it define the targets.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import List, NamedTuple, Optional, Sequence

from rlf.utils.tensorboard_reader import read_scalar_tags

TRAIN_TAG = "Metrics_vs_EnvironmentSteps/AverageReturn"
EVAL_TAG = "Eval_vs_EnvironmentSteps/AverageReturn"


class Run(NamedTuple):
    """One training run's curves (``steps`` in environment steps) and its wall-clock time."""

    steps: List[int]
    train: List[float]
    eval_steps: List[int]
    evals: List[float]
    seconds: float


def train(conf: str, seed: int, params: Sequence[str] = (), root_dir: Optional[str] = None,
          train_tag: str = TRAIN_TAG, eval_tag: str = EVAL_TAG) -> Run:
    """Runs ``python -m rlf.bin.train --conf conf`` with ``TrainerConfig.random_seed = seed``
    and ``params`` (``--conf_param`` values) in ``root_dir`` (a temporary directory if None)
    and returns its curves (``eval_tag``: ``Eval_vs_Updates/AverageReturn`` for a purely
    offline run).

    Raises:
        subprocess.CalledProcessError: if the run fails (its output is printed).
    """
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(root_dir or tmp)
        cmd = [sys.executable, "-m", "rlf.bin.train", "--conf", conf, "--root_dir", str(root),
               "--noprogress", "--conf_param", f"TrainerConfig.random_seed={seed}"]
        for p in params:
            cmd += ["--conf_param", p]
        t0 = time.perf_counter()
        done = subprocess.run(cmd, capture_output=True, text=True)
        seconds = time.perf_counter() - t0
        if done.returncode:
            print(done.stdout, done.stderr, sep="\n")
            done.check_returncode()
        series = read_scalar_tags(root / "train", [train_tag, eval_tag])
        steps, values, _ = series[train_tag]
        eval_steps, evals, _ = series[eval_tag]
    return Run(steps, values, eval_steps, evals, seconds)


def first_at_least(steps: Sequence[int], values: Sequence[float],
                   threshold: float) -> Optional[int]:
    """The first step whose value is ``>= threshold``, or None."""
    return next((s for s, v in zip(steps, values) if v >= threshold), None)


def value_at(steps: Sequence[int], values: Sequence[float], step: int) -> float:
    """The last value written at or before ``step`` (NaN if none)."""
    before = [v for s, v in zip(steps, values) if s <= step]
    return before[-1] if before else float("nan")


def control_targets_main(pendulum_conf: str, mujoco_conf: str) -> None:
    """The command line of the continuous-control benchmarks (SAC's, TD3's): trains
    ``pendulum_conf`` for seeds 0, 1, 2 (``AverageReturn >= -200`` within 15k environment
    steps), or with ``--mujoco`` ``mujoco_conf`` for seed 0 (``>= 3,000`` at 100k), and prints
    per seed the first step at the target, the value at the budget, the greedy evaluations
    and the wall time, then how many seeds met the target."""
    import argparse
    p = argparse.ArgumentParser()
    p.add_argument("--mujoco", action="store_true", help="HalfCheetah instead of Pendulum")
    p.add_argument("--seeds", type=int, nargs="+", default=None)
    p.add_argument("--root_dir", default=None, help="keep the (single) run here")
    p.add_argument("--conf_param", action="append", default=[])
    args = p.parse_args()
    if args.mujoco:
        conf, target, within = mujoco_conf, 3000.0, 100_000
        seeds = args.seeds or [0]
    else:
        conf, target, within = pendulum_conf, -200.0, 15_000
        seeds = args.seeds or [0, 1, 2]
    met = 0
    for seed in seeds:
        run = train(conf, seed, args.conf_param, root_dir=args.root_dir)
        first = first_at_least(run.steps, run.train, target)
        at = value_at(run.steps, run.train, within)
        ok = first is not None and first <= within
        met += ok
        print(f"seed {seed}: AverageReturn first >= {target:g} at "
              f"{first if first is not None else 'never'} env steps, {at:.1f} at {within}; "
              f"evaluations {[round(v) for v in run.evals]} at {run.eval_steps}; "
              f"{run.seconds / 60:.1f} min ({'met' if ok else 'NOT met'})", flush=True)
    print(f"{met} of {len(seeds)} seeds meet the target (AverageReturn >= {target:g} within "
          f"{within} env steps)")


def play_return(root: str, episodes: int = 10, zero_state: bool = False) -> float:
    """The average greedy return of ``episodes`` episodes played by ``rlf.bin.play`` from the
    newest checkpoint in ``root``; with ``zero_state`` the recurrent state is reset to its
    initial value at every step (``--zero_state``)."""
    cmd = [sys.executable, "-m", "rlf.bin.play", "--root_dir", root, "--num_episodes",
           str(episodes)] + (["--zero_state"] if zero_state else [])
    done = subprocess.run(cmd, capture_output=True, text=True, check=True)
    last = done.stdout.strip().splitlines()[-1]  # "average return X over N episodes (...)"
    return float(last.split()[2])


def memory_targets_main(recurrent_conf: str, feed_forward_conf: str, budget: int,
                        target: float) -> None:
    """The command line of the memory benchmarks (recurrent PPO's, R2D2's) on CartPole-v1
    without its velocities. Per seed of ``recurrent_conf``: the final greedy evaluation (10
    episodes, at ``budget`` environment steps) against ``target``, the training
    ``AverageReturn`` beside it, and the same policy played with its state zeroed at every
    step (``rlf.bin.play --zero_state``); then ``feed_forward_conf`` with the velocities
    masked, which stays below 200 if the task needs memory."""
    import argparse
    p = argparse.ArgumentParser()
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--feed_forward_seeds", type=int, nargs="*", default=[0])
    p.add_argument("--conf_param", action="append", default=[])
    args = p.parse_args()
    met = 0
    for seed in args.seeds:
        with tempfile.TemporaryDirectory() as root:
            run = train(recurrent_conf, seed, args.conf_param, root_dir=root)
            final = run.evals[-1] if run.evals else float("nan")
            zeroed = play_return(root, 10, zero_state=True)
        ok = final >= target and run.eval_steps[-1] >= budget
        met += ok
        print(f"seed {seed}: final greedy evaluation {final:.1f} at {run.eval_steps[-1]} env "
              f"steps (training AverageReturn {run.train[-1]:.1f}); state zeroed at every "
              f"step: {zeroed:.1f}; {run.seconds / 60:.1f} min ({'met' if ok else 'NOT met'})",
              flush=True)
    print(f"{met} of {len(args.seeds)} seeds meet the target (final greedy evaluation >= "
          f"{target:g} after {budget} env steps)")
    masked = "load_gym.masked_observation_indices=[1, 3]"
    for seed in args.feed_forward_seeds:
        run = train(feed_forward_conf, seed, [masked])
        final = run.evals[-1] if run.evals else float("nan")
        print(f"feed-forward {feed_forward_conf}, velocities masked, seed {seed}: final greedy "
              f"evaluation {final:.1f} at {run.eval_steps[-1]} env steps, best training "
              f"AverageReturn {max(run.train):.1f} ({'below' if final < 200 else 'NOT below'} "
              f"200)", flush=True)
