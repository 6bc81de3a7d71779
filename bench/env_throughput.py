"""Agent steps/s of rlf.environments.load("ALE/Pong-v5", N) vs the raw AtariVectorEnv.

The baseline is a second ``AtariVectorEnv`` built with exactly the same settings (taken from
an rlf environment's ``gym_env``) and stepped directly with numpy actions. Both use the same
pre-drawn random actions. Short rounds alternate (raw, rlf, raw, rlf, ...) and the medians
are compared, so machine noise hits both alike.

    python bench/env_throughput.py [--env ALE/Pong-v5] [--num_envs 32] [--rounds 20]
"""

import argparse
import statistics
import time

import numpy as np
import torch

from rlf.environments import load


def _steps_per_second(step, actions, num_envs):
    start = time.perf_counter()
    for a in actions:
        step(a)
    return len(actions) * num_envs / (time.perf_counter() - start)


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--env", default="ALE/Pong-v5")
    parser.add_argument("--num_envs", type=int, default=32)
    parser.add_argument("--steps_per_round", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    torch.set_num_threads(1)  # the environment threads need the cores

    raw = load(args.env, args.num_envs, seed=0).gym_env  # the bare AtariVectorEnv
    env = load(args.env, args.num_envs, seed=0)
    n_actions = int(env.action_spec().maximum) + 1
    rng = np.random.default_rng(0)
    np_actions = [rng.integers(0, n_actions, size=args.num_envs, dtype=np.int64)
                  for _ in range(args.steps_per_round)]
    torch_actions = [torch.from_numpy(a.copy()) for a in np_actions]
    raw.reset(seed=0)
    env.reset()
    _steps_per_second(raw.step, np_actions, args.num_envs)  # warm-up
    _steps_per_second(env.step, torch_actions, args.num_envs)

    raw_sps, rlf_sps = [], []
    for _ in range(args.rounds):
        raw_sps.append(_steps_per_second(raw.step, np_actions, args.num_envs))
        rlf_sps.append(_steps_per_second(env.step, torch_actions, args.num_envs))
    raw_med, rlf_med = statistics.median(raw_sps), statistics.median(rlf_sps)
    total = args.rounds * args.steps_per_round * args.num_envs
    print(f"{args.env}, {args.num_envs} envs, {total} agent steps each, random actions, "
          f"median of {args.rounds} alternating rounds")
    print(f"  raw AtariVectorEnv : {raw_med:8.0f} agent steps/s ({4 * raw_med:8.0f} frames/s)")
    print(f"  rlf load()         : {rlf_med:8.0f} agent steps/s ({4 * rlf_med:8.0f} frames/s)")
    print(f"  rlf / raw          : {100 * rlf_med / raw_med:6.1f} %  (target >= 95 %)")
    raw.close()
    env.close()


if __name__ == "__main__":
    main()
