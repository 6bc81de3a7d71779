"""Hindsight experience replay on bit flipping (Andrychowicz et al. 2017, §3.1 and Fig. 1): DQN
with ``HindsightSampler`` (the ``future`` strategy, ``her_proportion = 0.8``) against plain
DQN, the same network, settings and seeds, on ``rlf/BitFlipping-v0`` with ``--bits`` bits.

    python bench/her_bit_flipping.py [--bits 15] [--iterations 300] [--seeds 0,1,2]

Each run trains ``--iterations`` iterations of 16 environments x ``bits`` steps, then plays 100
greedy episodes; an episode succeeds when it reaches its goal (a return above ``-bits``).
Prints the success rate of each run and the median over seeds, DQN first (the baseline).
"""

from __future__ import annotations

import argparse
import functools
import statistics
import time

import torch

from rlf.algorithms import DQNAlgorithm, TrainerConfig, build_training
from rlf.environments import load
from rlf.networks import MLPEncoder, QNetwork
from rlf.replay import HindsightSampler
from rlf.trainers import evaluate_episodes
from rlf.unrollers import SyncUnroller


def run(bits: int, iterations: int, seed: int, her: bool) -> float:
    """One run's success rate over 100 greedy episodes."""
    torch.manual_seed(seed)
    env = load("rlf/BitFlipping-v0", 16, seed=seed, num_bits=bits)
    sampler = (HindsightSampler(achieved_goal=(0, bits), desired_goal=(bits, 2 * bits),
                                her_proportion=0.8) if her else None)
    config = TrainerConfig(unroll_length=bits, mini_batch_size=128, mini_batch_length=2,
                           num_updates_per_train_iter=16, replay_buffer_length=4096,
                           initial_collect_steps=16 * bits, num_iterations=iterations,
                           replay_sampler=sampler)
    alg = DQNAlgorithm(
        env.observation_spec(), env.action_spec(), env=env, config=config,
        q_network_ctor=functools.partial(
            QNetwork, encoder_ctor=functools.partial(MLPEncoder, hidden=(256,),
                                                     activation=torch.nn.ReLU)),
        gamma=0.98, epsilon_greedy=0.2, target_update_tau=0.05, target_update_period=1,
        optimizer=functools.partial(torch.optim.Adam, lr=1e-3))
    loop = build_training(alg, SyncUnroller(env, alg))
    for _ in range(iterations):
        loop.train_iter()
    eval_env = load("rlf/BitFlipping-v0", 10, seed=seed + 1000003, num_bits=bits)
    result = evaluate_episodes(alg, eval_env, 100)
    env.close()
    eval_env.close()
    return sum(r > -bits for r in result["returns"]) / len(result["returns"])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--bits", type=int, default=15)
    p.add_argument("--iterations", type=int, default=300)
    p.add_argument("--seeds", default="0,1,2")
    args = p.parse_args()
    torch.set_num_threads(1)
    seeds = [int(s) for s in args.seeds.split(",")]
    for name, her in (("DQN (baseline)", False), ("DQN + HER", True)):
        rates = []
        for seed in seeds:
            t0 = time.perf_counter()
            rates.append(run(args.bits, args.iterations, seed, her))
            print(f"{name:15s} bits={args.bits} seed={seed} success={rates[-1]:.2f} "
                  f"({time.perf_counter() - t0:.0f} s)", flush=True)
        print(f"{name:15s} median success over seeds {seeds}: {statistics.median(rates):.2f} "
              f"(range {min(rates):.2f}-{max(rates):.2f})", flush=True)


if __name__ == "__main__":
    main()
