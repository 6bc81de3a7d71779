"""Training throughput of a Pong conf (the synchronous one by default), next to three
baselines measured in the same run:

  (a) the raw ``AtariVectorEnv`` (same settings, same number of environments, random
      actions): the environment's own ceiling;
  (b) the same environments stepped with the same network's forward pass alone (no
      learning): the acting ceiling;
  (c) stable-baselines3 ``A2C("CnnPolicy")`` on ALE/Pong-v5 (SB3's Atari wrappers, frame skip
      4, 4 stacked frames) with the same number of environments, in a subprocess.

Then rlf trains for ``--seconds`` and prints agent steps/s and where the time goes (env
stepping, acting, learning, the rest).

    pip install -e ".[bench]"
    python bench/impala_atari_throughput.py [--seconds 120] [--sb3_seconds 60]
        [--conf confs/impala_atari_sync.gin] [--conf_param ...]
"""

import argparse
import subprocess
import sys
import textwrap
import time

import numpy as np
import torch

SB3 = textwrap.dedent("""
    import sys, time, torch, gymnasium as gym, ale_py
    gym.register_envs(ale_py)
    from stable_baselines3 import A2C
    from stable_baselines3.common.env_util import make_atari_env
    from stable_baselines3.common.vec_env import VecFrameStack
    n_envs, seconds, threads = int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])
    torch.set_num_threads(threads)
    # SB3's wrappers skip the frames; v5's sticky actions (0.25 per frame) as in rlf's confs.
    env = VecFrameStack(make_atari_env("ALE/Pong-v5", n_envs=n_envs, seed=0,
                                       env_kwargs={"frameskip": 1}), n_stack=4)
    model = A2C("CnnPolicy", env, verbose=0, seed=0)
    model.learn(total_timesteps=n_envs * 5 * 20)  # warm-up
    chunk, steps, t0 = n_envs * 5 * 50, 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        model.learn(total_timesteps=chunk, reset_num_timesteps=False)
        steps += chunk
    print(steps / (time.perf_counter() - t0))
""")


def _timed(fn, seconds):
    steps, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        steps += fn()
    return steps / (time.perf_counter() - t0)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--conf", default="confs/impala_atari_sync.gin")
    p.add_argument("--conf_param", action="append", default=[])
    p.add_argument("--seconds", type=float, default=120.0)
    p.add_argument("--baseline_seconds", type=float, default=15.0)
    p.add_argument("--sb3_seconds", type=float, default=60.0)
    args = p.parse_args()

    from rlf.trainers.gin_config import parse_config
    parse_config(args.conf, args.conf_param)
    from rlf.algorithms import TrainerConfig, TrainingLoop
    from rlf.environments import load
    from rlf.unrollers import SyncUnroller
    from rlf.utils import summary
    config = TrainerConfig()
    threads = config.torch_num_threads or torch.get_num_threads()
    torch.set_num_threads(threads)
    env = load(seed=0)
    n = env.batch_size
    print(f"{env.name}, {n} environments, torch threads {threads}")

    # (a) raw environment
    raw = env.gym_env
    raw.reset(seed=0)
    rng = np.random.default_rng(0)
    n_actions = int(env.action_spec().maximum) + 1

    def raw_step():
        raw.step(rng.integers(0, n_actions, size=n, dtype=np.int64))
        return n
    raw_sps = _timed(raw_step, args.baseline_seconds)
    print(f"(a) raw AtariVectorEnv           : {raw_sps:7.0f} agent steps/s")

    # (b) acting ceiling: same env and network, forward pass only
    alg = config.algorithm_ctor(observation_spec=env.observation_spec(),
                                action_spec=env.action_spec(), reward_spec=env.reward_spec(),
                                env=None, config=config)
    state = {"ts": env.reset(), "s": alg.get_initial_rollout_state(n)}

    @torch.no_grad()
    def act_step():
        step = alg.rollout_step(state["ts"], state["s"])
        state["ts"], state["s"] = env.step(step.output), step.state
        return n
    act_sps = _timed(act_step, args.baseline_seconds)
    print(f"(b) env + network forward only   : {act_sps:7.0f} agent steps/s")
    env.close()

    # (c) stable-baselines3 A2C
    sb3 = subprocess.run([sys.executable, "-c", SB3, str(n), str(args.sb3_seconds),
                          str(threads)], capture_output=True, text=True)
    if sb3.returncode == 0:
        a2c_sps = float(sb3.stdout.strip().splitlines()[-1])
        print(f"(c) SB3 A2C('CnnPolicy') training: {a2c_sps:7.0f} agent steps/s")
    else:
        a2c_sps = float("nan")
        print(f"(c) SB3 A2C failed ({sb3.stderr.strip().splitlines()[-1:]}); "
              f"pip install -e '.[bench]'")

    # rlf training
    env = load(seed=0)
    alg = config.algorithm_ctor(observation_spec=env.observation_spec(),
                                action_spec=env.action_spec(), reward_spec=env.reward_spec(),
                                env=env, config=config)
    loop = TrainingLoop(alg, SyncUnroller(env, alg))
    for _ in range(3):  # warm-up (buffers, first training iteration)
        loop.train_iter()
    summary.accumulated_times(reset=True)
    start_steps, t0 = alg.get_env_steps(), time.perf_counter()
    while time.perf_counter() - t0 < args.seconds:
        loop.train_iter()
    wall = time.perf_counter() - t0
    sps = (alg.get_env_steps() - start_steps) / wall
    times = summary.accumulated_times()
    env.close()
    env_t, act_t = times.get("time/env_step", 0.0), times.get("time/policy", 0.0)
    learn_t = times.get("time/train", 0.0)
    other = wall - env_t - act_t - learn_t
    print(f"rlf IMPALA training               : {sps:7.0f} agent steps/s "
          f"({4 * sps:.0f} frames/s) = {sps / a2c_sps:.2f}x SB3 A2C (target >= 1.5x)")
    print(f"  time: env.step {100 * env_t / wall:4.1f} %, acting (rollout_step) "
          f"{100 * act_t / wall:4.1f} %, learning {100 * learn_t / wall:4.1f} %, "
          f"other (metrics, replay, summaries) {100 * other / wall:4.1f} %")


if __name__ == "__main__":
    main()
