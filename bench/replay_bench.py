"""Replay-buffer throughput and memory: rlf vs stable-baselines3 and TorchRL, same run.

Atari-shaped steps (observation [4, 84, 84] uint8 frame stacks, Discrete(6) action, reward,
done; rlf stores a whole Experience incl. behaviour logits and value), added in batches of 32
environments until the buffer has wrapped, then sampled as 256 single steps and as
32 sequences x 20 steps. Each library runs in its own subprocess so that its peak RSS is its
own. Install the peers with ``pip install -e ".[bench]"``.

    python bench/replay_bench.py [--capacity 50000] [--seconds 3]
"""

import argparse
import json
import resource
import subprocess
import sys
import time

import numpy as np
import torch

NUM_ENVS = 32
OBS_SHAPE = (4, 84, 84)


def _frame_pool(n=16):
    """Pre-drawn observation batches [32, 4, 84, 84] whose stacks shift like an env's."""
    rng = np.random.default_rng(0)
    frames = rng.integers(0, 256, size=(n + 3, NUM_ENVS, 84, 84), dtype=np.uint8)
    return [np.ascontiguousarray(np.stack([frames[i + j] for j in range(4)], axis=1))
            for i in range(n)]


def _rate(fn, seconds):
    """Calls fn repeatedly for about `seconds`; returns calls per second."""
    fn()
    n, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        fn()
        n += 1
    return n / (time.perf_counter() - start)


def _peak_rss_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


# ----------------------------------------------------------------------------- rlf
def run_rlf(capacity, seconds):
    from rlf.data_structures import Experience, TimeStep, time_step_spec
    from rlf.replay import ReplayBuffer
    from rlf.tensor_specs import BoundedTensorSpec, TensorSpec

    obs_spec = BoundedTensorSpec(OBS_SHAPE, torch.uint8, 0, 255)
    act_spec = BoundedTensorSpec((), torch.int64, 0, 5)
    spec = Experience(time_step=time_step_spec(obs_spec, act_spec, TensorSpec(())),
                      action=act_spec,
                      rollout_info={"behaviour_logits": TensorSpec((6,)), "value": TensorSpec(())})
    rss0 = _peak_rss_mb()
    rb = ReplayBuffer(spec, NUM_ENVS, capacity // NUM_ENVS,
                      stacked_frames={"time_step.observation": 4})
    pool = [torch.from_numpy(o) for o in _frame_pool()]
    z = torch.zeros(NUM_ENVS)
    batches = [Experience(
        time_step=TimeStep(step_type=torch.ones(NUM_ENVS, dtype=torch.int32), reward=z,
                           discount=torch.ones(NUM_ENVS), observation=o,
                           prev_action=torch.zeros(NUM_ENVS, dtype=torch.int64),
                           env_id=torch.arange(NUM_ENVS, dtype=torch.int32), env_info={}),
        action=torch.zeros(NUM_ENVS, dtype=torch.int64),
        rollout_info={"behaviour_logits": torch.zeros(NUM_ENVS, 6), "value": z})
        for o in pool]
    it = iter(range(10**12))

    def add():
        rb.add_batch(batches[next(it) % len(batches)])
    while rb.total_size < capacity // NUM_ENVS * NUM_ENVS:
        add()
    add_rate = _rate(add, seconds) * NUM_ENVS
    single = _rate(lambda: rb.get_batch(256, 1), seconds)
    seq = _rate(lambda: rb.get_batch(32, 20), seconds)
    nbytes = sum(b.numel() * b.element_size() for b in rb.buffers())
    return dict(add=add_rate, sample256=single, seq32x20=seq,
                bytes_per_step=nbytes / (NUM_ENVS * rb.max_length),
                rss=_peak_rss_mb(), rss_delta=_peak_rss_mb() - rss0)


# ----------------------------------------------------------------------------- SB3
def run_sb3(capacity, seconds):
    from gymnasium import spaces
    from stable_baselines3.common.buffers import ReplayBuffer

    rss0 = _peak_rss_mb()
    rb = ReplayBuffer(capacity, spaces.Box(0, 255, OBS_SHAPE, np.uint8), spaces.Discrete(6),
                      device="cpu", n_envs=NUM_ENVS, optimize_memory_usage=False,
                      handle_timeout_termination=True)
    pool = _frame_pool()
    action = np.zeros((NUM_ENVS, 1), dtype=np.int64)
    reward = np.zeros(NUM_ENVS, dtype=np.float32)
    done = np.zeros(NUM_ENVS, dtype=np.float32)
    infos = [{} for _ in range(NUM_ENVS)]
    it = iter(range(10**12))

    def add():
        i = next(it)
        rb.add(pool[i % len(pool)], pool[(i + 1) % len(pool)], action, reward, done, infos)

    while not rb.full:
        add()
    add_rate = _rate(add, seconds) * NUM_ENVS
    single = _rate(lambda: rb.sample(256), seconds)
    nbytes = sum(getattr(rb, k).nbytes for k in ("observations", "next_observations",
                                                 "actions", "rewards", "dones", "timeouts"))
    return dict(add=add_rate, sample256=single, seq32x20=None,
                bytes_per_step=nbytes / (rb.buffer_size * NUM_ENVS),
                rss=_peak_rss_mb(), rss_delta=_peak_rss_mb() - rss0)


# ----------------------------------------------------------------------------- TorchRL
def run_torchrl(capacity, seconds):
    from tensordict import TensorDict
    from torchrl.data import LazyTensorStorage, ReplayBuffer
    from torchrl.data.replay_buffers import SliceSampler

    rss0 = _peak_rss_mb()
    pool = [torch.from_numpy(o) for o in _frame_pool()]
    tds = [TensorDict({"observation": o, "action": torch.zeros(NUM_ENVS, dtype=torch.int64),
                       "reward": torch.zeros(NUM_ENVS, 1),
                       "done": torch.zeros(NUM_ENVS, 1, dtype=torch.bool),
                       "episode": torch.arange(NUM_ENVS)}, batch_size=[NUM_ENVS])
           for o in pool]
    storage = LazyTensorStorage(capacity)
    rb = ReplayBuffer(storage=storage, batch_size=256)
    it = iter(range(10**12))

    def add():
        rb.extend(tds[next(it) % len(tds)])
    while len(rb) < capacity:
        add()
    add_rate = _rate(add, seconds) * NUM_ENVS
    single = _rate(lambda: rb.sample(), seconds)
    # Sequences: a second buffer whose storage is [envs, time] (ndim=2), sliced by episode.
    seq_rb = ReplayBuffer(storage=LazyTensorStorage(capacity // NUM_ENVS * NUM_ENVS, ndim=2),
                          sampler=SliceSampler(num_slices=32, traj_key="episode",
                                               strict_length=True),
                          batch_size=32 * 20)
    steps = [td.unsqueeze(1) for td in tds]  # [32, 1]: one time step for each env
    for i in range(capacity // NUM_ENVS):
        seq_rb.extend(steps[i % len(steps)])
    seq = _rate(lambda: seq_rb.sample(), seconds)
    nbytes = sum(v.numel() * v.element_size()
                 for v in storage._storage.values(include_nested=True, leaves_only=True))
    return dict(add=add_rate, sample256=single, seq32x20=seq,
                bytes_per_step=nbytes / capacity,
                rss=_peak_rss_mb(), rss_delta=_peak_rss_mb() - rss0)


RUNNERS = {"rlf": run_rlf, "stable-baselines3": run_sb3, "torchrl": run_torchrl}


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--capacity", type=int, default=50_000, help="total steps held")
    parser.add_argument("--seconds", type=float, default=3.0, help="per measurement")
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    parser.add_argument("--only", help=argparse.SUPPRESS)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    if args.only:
        print(json.dumps(RUNNERS[args.only](args.capacity, args.seconds)))
        return
    results = {}
    for name in RUNNERS:
        proc = subprocess.run([sys.executable, __file__, "--only", name, "--capacity",
                               str(args.capacity), "--seconds", str(args.seconds),
                               "--threads", str(args.threads)],
                              capture_output=True, text=True)
        if proc.returncode:
            print(f"{name}: failed\n{proc.stderr[-2000:]}")
            continue
        results[name] = json.loads(proc.stdout.strip().splitlines()[-1])
    print(f"Atari-shaped steps, {NUM_ENVS} envs per add, capacity {args.capacity} steps, "
          f"{args.threads} torch thread(s)")
    print(f"{'library':18s} {'add steps/s':>12s} {'256-step batches/s':>19s} "
          f"{'32x20 seq batches/s':>20s} {'KB/step':>8s} {'peak RSS MB':>12s}")
    for name, r in results.items():
        seq = f"{r['seq32x20']:.0f}" if r["seq32x20"] is not None else "n/a"
        print(f"{name:18s} {r['add']:12.0f} {r['sample256']:19.0f} {seq:>20s} "
              f"{r['bytes_per_step'] / 1024:8.2f} {r['rss']:12.0f}")
    print("targets: rlf add and 256-sample >= the faster peer; <= 7.5 KB per Atari step")


if __name__ == "__main__":
    main()
