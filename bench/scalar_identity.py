"""Same seed, same scalars across two commits: every shipped conf and example trained for its
first iterations at a base commit and at a head commit (each checked out in its own git
worktree), side by side on this CPU, must write identical TensorBoard scalars (all but the
timings ``time/*``). A refactor of the training code proves itself with it.

    python bench/scalar_identity.py --base REV [--head REV] [--iterations 12]
        [--only impala_cartpole,sac_pendulum] [--as_shipped] [--conf_param BINDING ...]

``--head`` defaults to the working tree as it is. Runs use ``random_seed = 0``, a summary at
every iteration and an evaluation at the last one; actor confs run in the reproducible mode
(``TrainerConfig.deterministic = True``), since free-running actors are not a function of the
seed. Confs that wait for a large replay buffer start training after a small
``initial_collect_steps`` here, so that the first iterations train. The offline confs train on
``tests/data/alf_pendulum_sac_replay_buffer.pt`` (on Pendulum), ``bc_cartpole`` on a CartPole
replay file that ``dqn_cartpole.gin`` writes at the base commit first.

``--as_shipped`` drops those per-conf bindings: each conf runs as shipped but for the seed, the
iterations and the summaries (for confs that train from their first iterations, e.g.
``--only impala_atari --iterations 300 --as_shipped``). ``--conf_param`` adds a binding to every
run (e.g. ``"load.env_name='ALE/Breakout-v5'"``).

Prints one line per conf: identical or not, the number of tags and points compared, and the
first differing tag; exits 1 if any differs.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ALF_PENDULUM = REPO / "tests" / "data" / "alf_pendulum_sac_replay_buffer.pt"
ACTORS = ["TrainerConfig.deterministic = True"]
SHORT_REPLAY = ["TrainerConfig.initial_collect_steps = 256"]
ONE_STEP_REPLAY = ["TrainerConfig.initial_collect_steps = 4"]  # one step an iteration
PENDULUM_OFFLINE = ["load.env_name = 'Pendulum-v1'",
                    f"TrainerConfig.offline_buffer_dir = '{ALF_PENDULUM}'",
                    "TrainerConfig.offline_normalized_actions = True"]

#: conf -> the bindings that make its first iterations train (beside the common ones).
CONFS = {
    "confs/impala_cartpole.gin": [],
    "confs/impala_atari.gin": ACTORS + ["load.num_envs = 4"],
    "confs/impala_atari_sync.gin": ["load.num_envs = 4"],
    "confs/impala_atari_replay.gin": ACTORS + ["load.num_envs = 4"],
    "confs/ppo_cartpole.gin": [],
    "confs/ppo_cartpole_novel.gin": [],
    "confs/ppo_atari.gin": ["load.num_envs = 2", "TrainerConfig.unroll_length = 16",
                            "TrainerConfig.mini_batch_size = 8"],
    "confs/ppo_mujoco.gin": ["TrainerConfig.unroll_length = 256"],
    "confs/sac_pendulum.gin": ONE_STEP_REPLAY,
    "confs/sac_mujoco.gin": ONE_STEP_REPLAY,
    "confs/td3_pendulum.gin": ONE_STEP_REPLAY,
    "confs/td3_mujoco.gin": ONE_STEP_REPLAY,
    "confs/dqn_cartpole.gin": SHORT_REPLAY,
    "confs/dqn_atari.gin": SHORT_REPLAY + ["TrainerConfig.unroll_length = 64"],
    "confs/dqn_her_bit_flipping.gin": [],
    "confs/r2d2_cartpole_novel.gin": SHORT_REPLAY + ["TrainerConfig.unroll_length = 32"],
    "confs/r2d2_atari.gin": SHORT_REPLAY + ["load.num_envs = 2",
                                            "TrainerConfig.unroll_length = 80",
                                            "TrainerConfig.mini_batch_size = 4"],
    "confs/iql_mujoco.gin": PENDULUM_OFFLINE,
    "examples/a2c_cartpole.gin": [],
    "examples/bc_mujoco.gin": PENDULUM_OFFLINE,
    "examples/bc_cartpole.gin": [],  # + the recorded CartPole file (main)
    "examples/record_cartpole.gin": ["TrainerConfig.initial_collect_steps = 512"],
}
#: Skipped where the GPU conf needs CUDA.
GPU_CONFS = ["confs/impala_atari_gpu.gin"]


def worktree(rev: str | None, parent: Path) -> Path:
    """A checkout of ``rev`` (the working tree itself for None)."""
    if rev is None:
        return REPO
    path = parent / rev.replace("/", "_")
    subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", "-f", str(path),
                    rev], check=True, capture_output=True)
    return path


def train(tree: Path, conf: str, root: Path, params, iterations: int) -> float:
    """Trains ``conf`` of checkout ``tree`` for ``iterations``; returns the wall seconds."""
    common = ["TrainerConfig.random_seed = 0", f"TrainerConfig.num_iterations = {iterations}",
              "TrainerConfig.num_env_steps = 0", "TrainerConfig.summary_interval = 1",
              f"TrainerConfig.eval_interval = {iterations}", "TrainerConfig.num_eval_episodes = 2",
              "TrainerConfig.num_eval_environments = 2"]
    cmd = [sys.executable, "-m", "rlf.bin.train", "--conf", conf, "--root_dir", str(root),
           "--noprogress"]
    for p in common + list(params):
        cmd += ["--conf_param", p]
    env = dict(os.environ, PYTHONPATH=str(tree))
    t0 = time.perf_counter()
    r = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True, timeout=1800)
    if r.returncode:
        raise RuntimeError(f"{conf} at {tree}: exit {r.returncode}: {r.stderr[-2000:]}")
    return time.perf_counter() - t0


def scalars(root: Path) -> dict:
    """``{tag: [(step, value), ...]}`` of a run's ``train/`` events, ``time/*`` left out."""
    from rlf.utils.tensorboard_reader import read_scalar_tags
    return {t: list(zip(steps, values))
            for t, (steps, values, _) in read_scalar_tags(root / "train").items()
            if not t.startswith("time/")}


def compare(a: dict, b: dict) -> str | None:
    """None if identical, else the first difference in words."""
    if set(a) != set(b):
        return f"tags only in base {sorted(set(a) - set(b))[:3]}, only in head " \
               f"{sorted(set(b) - set(a))[:3]}"
    for tag in sorted(a):
        if a[tag] != b[tag]:
            first = next((x, y) for x, y in zip(a[tag], b[tag]) if x != y) \
                if len(a[tag]) == len(b[tag]) else (len(a[tag]), len(b[tag]))
            return f"{tag}: {first[0]} vs {first[1]}"
    return None


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--base", required=True, help="the commit before the change")
    p.add_argument("--head", default=None, help="the commit after it (default: working tree)")
    p.add_argument("--iterations", type=int, default=12)
    p.add_argument("--only", default="", help="comma-separated conf names (default: all)")
    p.add_argument("--as_shipped", action="store_true",
                   help="leave out the per-conf bindings that make the first iterations train")
    p.add_argument("--conf_param", action="append", default=[],
                   help="a gin binding for every run (repeatable)")
    args = p.parse_args()
    only = {s.strip() for s in args.only.split(",") if s.strip()}
    confs = {c: ([] if args.as_shipped else v) + args.conf_param
             for c, v in CONFS.items() if not only or Path(c).stem in only}
    failed = 0
    with tempfile.TemporaryDirectory(prefix="rlf_identity_") as tmp:
        tmp = Path(tmp)
        trees = {"base": worktree(args.base, tmp / "trees"),
                 "head": worktree(args.head, tmp / "trees")}
        try:
            if "examples/bc_cartpole.gin" in confs:
                record = tmp / "record"
                train(trees["base"], "confs/dqn_cartpole.gin", record,
                      SHORT_REPLAY + ["TrainerConfig.save_replay_buffer = True"], 4)
                replay = next((record / "ckpt").glob("replay_buffer-*.pt"))
                confs["examples/bc_cartpole.gin"] = [
                    f"TrainerConfig.offline_buffer_dir = '{replay}'"] + args.conf_param
            print(f"{'conf':34s} {'result':10s} {'tags':>5s} {'points':>7s} "
                  f"{'base s':>7s} {'head s':>7s}")
            for conf, params in confs.items():
                found, secs = {}, {}
                for side, tree in trees.items():
                    root = tmp / "runs" / side / Path(conf).stem
                    secs[side] = train(tree, conf, root, params, args.iterations)
                    found[side] = scalars(root)
                diff = compare(found["base"], found["head"])
                points = sum(len(v) for v in found["base"].values())
                print(f"{conf:34s} {'identical' if diff is None else 'DIFFERS':10s} "
                      f"{len(found['base']):5d} {points:7d} {secs['base']:7.1f} "
                      f"{secs['head']:7.1f}" + ("" if diff is None else f"\n    {diff}"),
                      flush=True)
                failed += diff is not None
        finally:
            for tree in trees.values():
                if tree != REPO:
                    subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force",
                                    str(tree)], capture_output=True)
    print(f"{len(confs) - failed} of {len(confs)} identical; skipped (need CUDA): "
          f"{', '.join(GPU_CONFS)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
