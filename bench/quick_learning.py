"""Short learning checks of the training paths, one run each with seed 0 and one torch thread:
A2C on CartPole on-policy (the rollout's graph) and off-policy (whole-buffer epochs), IMPALA
and PPO on CartPole, DQN with prioritised replay on CartPole, SAC on Pendulum. Each trains
through ``alg.train_iter()`` (ALF's entry point) and is compared with its target and with a
uniformly random policy measured in the same run.

    python bench/quick_learning.py [--only a2c_on_policy,sac_pendulum]

Prints one line per check (return reached, target, random policy's return, seconds) and exits
1 if a check misses its target.
"""

from __future__ import annotations

import argparse
import functools
import sys
import time
from pathlib import Path
from typing import Callable, Dict, Tuple

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from examples.a2c import A2C  # noqa: E402
from rlf.algorithms import (DQNAlgorithm, ImpalaAlgorithm, PPOAlgorithm,  # noqa: E402
                            SACAlgorithm, TrainerConfig)
from rlf.environments import load  # noqa: E402
from rlf.networks import ActorCriticNetwork  # noqa: E402
from rlf.algorithms import loop_of


def _average_return(alg) -> float:
    """The training episodes' ``AverageReturn`` (the loop's third metric)."""
    return float(loop_of(alg).metrics[2].result())


def a2c(on_policy: bool) -> float:
    """A2C (examples/a2c.py) on 8 CartPoles: the best ``AverageReturn`` within 600
    iterations (checked every 25)."""
    env = load("CartPole-v1", 8, seed=0)
    extra = {} if on_policy else dict(whole_replay_buffer_training=True,
                                      clear_replay_buffer=True)
    config = TrainerConfig(unroll_length=16, num_iterations=600, **extra)
    alg = A2C(env.observation_spec(), env.action_spec(), env=env, config=config,
              is_on_policy=on_policy, gradient_clipping=0.5,
              optimizer=functools.partial(torch.optim.Adam, lr=2e-3))
    best = 0.0
    for i in range(1, 601):
        alg.train_iter()
        if i % 25 == 0:
            best = max(best, _average_return(alg))
            if best >= 195:
                break
    env.close()
    return best


def impala() -> float:
    """IMPALA on 16 CartPoles, whole-buffer epochs: the best ``AverageReturn`` within 80k
    steps (checked every 20 iterations)."""
    env = load("CartPole-v1", 16, seed=0)
    config = TrainerConfig(unroll_length=16, whole_replay_buffer_training=True,
                           clear_replay_buffer=True, num_iterations=1)
    alg = ImpalaAlgorithm(
        env.observation_spec(), env.action_spec(), env=env, config=config, td_lambda=0.95,
        network_ctor=functools.partial(ActorCriticNetwork, shared_encoder=False),
        optimizer=functools.partial(torch.optim.Adam, lr=2e-3), gradient_clipping=0.5)
    best = 0.0
    while alg.get_env_steps() < 80_000 and best < 150:
        for _ in range(20):
            alg.train_iter()
        best = max(best, _average_return(alg))
    env.close()
    return best


def ppo() -> float:
    """PPO on 8 CartPoles: ``AverageReturn`` after 25k steps."""
    env = load("CartPole-v1", 8, seed=0)
    config = TrainerConfig(unroll_length=32, num_updates_per_train_iter=10,
                           mini_batch_size=64, mini_batch_length=1, num_iterations=0,
                           num_env_steps=25_000)
    alg = PPOAlgorithm(
        env.observation_spec(), env.action_spec(), env=env, config=config, gamma=0.98,
        td_lambda=0.8, network_ctor=functools.partial(ActorCriticNetwork,
                                                      shared_encoder=False),
        optimizer=functools.partial(torch.optim.Adam, lr=1e-3), gradient_clipping=0.5)
    while alg.get_env_steps() < 25_000:
        alg.train_iter()
    env.close()
    return _average_return(alg)


def dqn_prioritised() -> float:
    """DQN with prioritised replay on one CartPole: the best ``AverageReturn`` within 120
    iterations of 128 steps (checked every 10)."""
    env = load("CartPole-v1", 1, seed=0)
    config = TrainerConfig(unroll_length=128, num_updates_per_train_iter=64,
                           mini_batch_size=64, mini_batch_length=2, initial_collect_steps=500,
                           replay_buffer_length=20000, num_iterations=100,
                           priority_replay=True)
    alg = DQNAlgorithm(env.observation_spec(), env.action_spec(), env=env, config=config,
                       epsilon_greedy=[(0, 1.0), (4000, 0.04)], target_update_period=64,
                       optimizer=functools.partial(torch.optim.Adam, lr=2.3e-3),
                       gradient_clipping=10.0)
    best = 0.0
    for i in range(120):
        alg.train_iter()
        if i % 10 == 9:
            best = max(best, _average_return(alg))
    env.close()
    return best


def _greedy_pendulum(alg, num_envs: int = 4) -> float:
    """The greedy policy's mean return over ``num_envs`` whole Pendulum episodes."""
    env = load("Pendulum-v1", num_envs, seed=100)
    time_step, total = env.reset(), torch.zeros(num_envs)
    with torch.no_grad():
        for _ in range(200):  # one whole episode (the time limit)
            time_step = env.step(alg.predict_step(time_step, ()).output)
            total += time_step.reward
    env.close()
    return float(total.mean())


def sac() -> float:
    """SAC on Pendulum: the greedy policy's return after 3,000 iterations of one step
    (training from the 200th)."""
    adam = functools.partial(torch.optim.Adam, lr=1e-3)
    env = load("Pendulum-v1", 1, seed=0)
    config = TrainerConfig(unroll_length=1, mini_batch_size=128, mini_batch_length=2,
                           initial_collect_steps=200, replay_buffer_length=10000,
                           num_iterations=3000)
    alg = SACAlgorithm(env.observation_spec(), env.action_spec(), env=env, config=config,
                       actor_optimizer=adam, critic_optimizer=adam, alpha_optimizer=adam)
    for _ in range(3000):
        alg.train_iter()
    env.close()
    return _greedy_pendulum(alg)


def _random_return(env_name: str, episodes: int = 20) -> float:
    """A uniformly random policy's mean return over ``episodes`` episodes (the baseline)."""
    import gymnasium as gym
    env = gym.make(env_name)
    env.action_space.seed(0)
    total = 0.0
    for e in range(episodes):
        env.reset(seed=e)
        done = False
        while not done:
            _, reward, terminated, truncated, _ = env.step(env.action_space.sample())
            total += float(reward)
            done = terminated or truncated
    env.close()
    return total / episodes


#: name -> (the check, its target: the return it must reach, the environment).
CHECKS: Dict[str, Tuple[Callable[[], float], float, str]] = {
    "a2c_on_policy": (functools.partial(a2c, True), 195.0, "CartPole-v1"),
    "a2c_off_policy": (functools.partial(a2c, False), 195.0, "CartPole-v1"),
    "impala_cartpole": (impala, 150.0, "CartPole-v1"),
    "ppo_cartpole": (ppo, 150.0, "CartPole-v1"),
    "dqn_prioritised_cartpole": (dqn_prioritised, 100.0, "CartPole-v1"),
    "sac_pendulum": (sac, -700.0, "Pendulum-v1"),
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default="", help="comma-separated check names")
    args = parser.parse_args()
    names = [n for n in args.only.split(",") if n] or list(CHECKS)
    torch.set_num_threads(1)
    print(f"{'check':28s} {'reached':>9s} {'target':>8s} {'random':>8s} {'seconds':>8s}")
    missed = 0
    for name in names:
        check, target, env_name = CHECKS[name]
        torch.manual_seed(0)
        start = time.perf_counter()
        reached = check()
        seconds = time.perf_counter() - start
        missed += reached < target
        print(f"{name:28s} {reached:9.1f} {target:8.1f} {_random_return(env_name):8.1f} "
              f"{seconds:8.1f}{'' if reached >= target else '  MISSED'}", flush=True)
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
