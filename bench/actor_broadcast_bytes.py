"""Bytes per parameter broadcast to each actor, for the shipped confs: what
``actor_state_dict()`` sends (the acting modules and the algorithm's own tensors) beside what
sending every parameter and buffer but the metrics' would take (the baseline).

    python bench/actor_broadcast_bytes.py [--confs confs/sac_mujoco.gin ...]
"""

import argparse

import gin
import torch
from torch import nn

DEFAULT = ["confs/sac_mujoco.gin", "confs/td3_mujoco.gin", "confs/dqn_atari.gin",
           "confs/impala_atari.gin"]


def _bytes(tensors) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--confs", nargs="+", default=DEFAULT)
    args = p.parse_args()
    from rlf.algorithms import TrainerConfig
    from rlf.trainers.gin_config import parse_config
    from rlf.environments import load
    from rlf.unrollers.actor_params import actor_state_dict
    print(f"{'conf':<26} {'all but metrics':>16} {'actor_state_dict':>17} {'ratio':>6}")
    for conf in args.confs:
        gin.clear_config()
        parse_config(conf, ["load.num_envs=1"])
        config = TrainerConfig()
        env = load(seed=0)
        alg = config.algorithm_ctor(observation_spec=env.observation_spec(),
                                    action_spec=env.action_spec(),
                                    reward_spec=env.reward_spec(), env=None, config=config)
        env.close()
        everything = [v for k, v in nn.Module.state_dict(alg, keep_vars=True).items()
                      if isinstance(v, torch.Tensor) and not k.startswith("_metrics.")]
        before, after = _bytes(everything), _bytes(actor_state_dict(alg).values())
        print(f"{conf:<26} {before:>16,} {after:>17,} {before / after:>5.2f}x")


if __name__ == "__main__":
    main()
