"""Rollout throughput on Pong: stepping all environments at once against double-buffered
stepping (two halves, the network acting on one while ALE steps the other).

    python bench/double_buffered_rollout.py [--steps 600] [--rounds 2] [--num_envs 16]
        [--ale_threads 2]

No learning: each agent step is ALE (``ale_py.vector_env.AtariVectorEnv``, v5 preprocessing:
frameskip 4, 84x84 grayscale, 4 stacked frames) plus a no-grad NatureCNN forward pass and a
categorical sample, as in an actor or in the rollout phase of ``SyncUnroller``. Modes:

- ``plain``: ``env.step(actions)`` for all ``num_envs`` (what ``SyncUnroller`` does);
- ``double``: ``AtariVectorEnv(batch_size=num_envs // 2)``; ``send`` the actions of the half
  just received, then ``recv`` whichever half is ready, so ALE's threads step one half while
  the network acts on the other (Sample Factory's double-buffered sampling; EnvPool's
  ``batch_size < num_envs``).

Each runs with 1 and with 2 torch threads; the modes alternate for ``--rounds`` rounds, since
this VM's speed drifts between minutes. Printed: agent steps/s, the cores kept busy (process
CPU seconds over wall seconds, all threads) and CPU ms per agent step. This measures what a
double-buffered ``SyncUnroller`` could gain in the rollout phase; rlf does not have one.
"""

import argparse
import time

import numpy as np
import torch
from ale_py.vector_env import AtariVectorEnv

from rlf.networks.encoders import NatureCNN
from rlf.tensor_specs import TensorSpec


def measure(double: bool, steps: int, num_envs: int, ale_threads: int, torch_threads: int):
    """Runs ``steps`` agent steps of every environment after 20 warm-up steps.

    Returns:
        ``(agent steps/s, busy cores, CPU ms per agent step)``.
    """
    torch.set_num_threads(torch_threads)
    torch.manual_seed(0)
    net = torch.nn.Sequential(NatureCNN(TensorSpec((4, 84, 84), torch.uint8)),
                              torch.nn.Linear(512, 6))

    def act(obs: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            logits = net(torch.from_numpy(obs))
        return torch.distributions.Categorical(logits=logits).sample().numpy()

    env = AtariVectorEnv("pong", num_envs, batch_size=num_envs // 2 if double else 0,
                         num_threads=ale_threads, stack_num=4, frameskip=4, img_height=84,
                         img_width=84, grayscale=True)
    try:
        obs, _ = env.reset(seed=0)
        # A half-sized batch covers half of the environments: twice the calls per agent step.
        calls = 2 if double else 1
        for i in range(-20 * calls, steps * calls):
            if i == 0:
                t0, c0 = time.perf_counter(), time.process_time()
            env.send(act(obs))
            obs, *_ = env.recv()
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    finally:
        env.close()
    n = steps * num_envs
    return n / wall, cpu / wall, 1000 * cpu / n


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=600, help="agent steps per environment")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--num_envs", type=int, default=16)
    p.add_argument("--ale_threads", type=int, default=2)
    args = p.parse_args()
    if args.steps < 1 or args.num_envs < 2 or args.num_envs % 2:
        # Two equal halves: each agent step is then exactly two send/recv calls.
        p.error(f"--steps must be >= 1 and --num_envs even and >= 2, got {args.steps} and "
                f"{args.num_envs}")
    for r in range(args.rounds):
        for threads in (1, 2):
            for double in (False, True):
                sps, cores, ms = measure(double, args.steps, args.num_envs, args.ale_threads,
                                         threads)
                print(f"round {r}: {'double' if double else 'plain '}, {threads} torch "
                      f"thread{'s' if threads > 1 else ' '}: {sps:6.0f} agent steps/s, "
                      f"{cores:.2f} cores busy, {ms:.3f} CPU ms per agent step", flush=True)


if __name__ == "__main__":
    main()
