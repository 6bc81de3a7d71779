"""One learner against several (``TrainerConfig.num_learners``) on the same conf and the same
total of environments, side by side on this machine: training iterations and environment steps
per second, from the wall times of the summaries the runs write from iteration ``start`` on
(start-up, the launch of the learners and the replay's warm-up are left out).

    python bench/learners.py [--learners 2] [--cases sac_mujoco,impala_atari]
        [--device cpu]

Cases:

- ``sac_mujoco``: ``confs/sac_mujoco.gin`` (HalfCheetah) with 2 environments, training after
  256 steps (128 iterations), measured over iterations 200-700 (one update of 256
  transitions each).
- ``impala_atari``: ``confs/impala_atari.gin`` (Pong, actor processes in the reproducible
  mode) with 2 actors of 16 games, measured over iterations 10-60.
- ``impala_atari_gpu``: ``confs/impala_atari_gpu.gin``, for a machine with CUDA devices,
  iterations 25-200.

Prints one line per case and number of learners, with the CPU's name.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

#: case -> (conf, iterations, summary interval, first measured iteration, bindings)
CASES = {
    "sac_mujoco": ("confs/sac_mujoco.gin", 700, 100, 200,
                   ["load.num_envs = 2", "TrainerConfig.initial_collect_steps = 256",
                    "TrainerConfig.evaluate = False"]),
    "impala_atari": ("confs/impala_atari.gin", 60, 10, 10,
                     ["TrainerConfig.num_actors = 2", "TrainerConfig.evaluate = False"]),
    "impala_atari_gpu": ("confs/impala_atari_gpu.gin", 200, 25, 25,
                         ["TrainerConfig.evaluate = False"]),
}


def cpu_name() -> str:
    """The CPU's model name (``/proc/cpuinfo``)."""
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return "unknown CPU"


def measure(conf: str, iterations: int, interval: int, start: int, bindings, learners: int,
            device: str) -> dict:
    """Trains ``conf`` with ``learners`` learners; returns iterations and environment steps
    per second between its summary at iteration ``start`` and its last."""
    from rlf.utils.tensorboard_reader import read_scalar_tags
    with tempfile.TemporaryDirectory() as tmp:
        params = bindings + [f"TrainerConfig.num_iterations = {iterations}",
                             "TrainerConfig.num_env_steps = 0",
                             f"TrainerConfig.summary_interval = {interval}",
                             f"TrainerConfig.checkpoint_interval = {iterations * 10}",
                             f"TrainerConfig.num_learners = {learners}"]
        if device != "cpu":
            params.append(f"TrainerConfig.device = '{device}'")
        args = [sys.executable, "-m", "rlf.bin.train", "--conf", conf, "--root_dir", tmp,
                "--noprogress"]
        for p in params:
            args += ["--conf_param", p]
        result = subprocess.run(args, cwd=REPO, capture_output=True, text=True)
        if result.returncode:
            raise SystemExit(f"{conf} with {learners} learner(s) failed: "
                             f"{result.stderr.strip().splitlines()[-1]}")
        tag = "Metrics/EnvironmentSteps"
        steps, values, times = read_scalar_tags(Path(tmp) / "train", [tag])[tag]
    first = steps.index(start)
    seconds = times[-1] - times[first]
    return {"iterations/s": (steps[-1] - steps[first]) / seconds,
            "env steps/s": (values[-1] - values[first]) / seconds}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--learners", type=int, default=2)
    parser.add_argument("--cases", default="sac_mujoco,impala_atari")
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    print(f"# {cpu_name()}; device {args.device}")
    print(f"{'case':18s} {'learners':>8s} {'iterations/s':>13s} {'env steps/s':>12s} "
          f"{'vs 1':>6s}")
    for case in args.cases.split(","):
        conf, iterations, interval, start, bindings = CASES[case]
        base = None
        for learners in (1, args.learners):
            found = measure(conf, iterations, interval, start, bindings, learners,
                            args.device)
            base = base or found["env steps/s"]
            print(f"{case:18s} {learners:8d} {found['iterations/s']:13.2f} "
                  f"{found['env steps/s']:12.1f} {found['env steps/s'] / base:6.2f}",
                  flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
