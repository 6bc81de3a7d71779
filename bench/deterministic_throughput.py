"""The throughput cost of the reproducible actor-learner mode on the main Atari conf:
confs/impala_atari.gin free-running and with ``TrainerConfig.deterministic=True``
(``policy_lag`` 1), measured in alternating rounds (``async_throughput.measure``: agent steps
per second after 3 warm-up iterations), with the median and range of the per-round ratio.

    python bench/deterministic_throughput.py [--seconds 45] [--rounds 5] [--policy_lag 1]
"""

import argparse
import statistics

import torch
from async_throughput import measure


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--seconds", type=float, default=45.0, help="per mode and round")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--policy_lag", type=int, default=1)
    args = p.parse_args()
    conf = "confs/impala_atari.gin"
    deterministic = ["TrainerConfig.deterministic=True",
                     f"TrainerConfig.policy_lag={args.policy_lag}"]
    ratios = []
    for r in range(args.rounds):
        torch.use_deterministic_algorithms(False)
        free = measure(conf, ["TrainerConfig.deterministic=False"], args.seconds)
        torch.use_deterministic_algorithms(True)  # as rlf.bin.train sets it for the learner
        fixed = measure(conf, deterministic, args.seconds)
        ratios.append(fixed[0] / free[0])
        print(f"round {r}: free-running {free[0]:6.0f} agent steps/s (learner idle "
              f"{100 * free[1]:.1f} %); deterministic {fixed[0]:6.0f} (learner idle "
              f"{100 * fixed[1]:.1f} %); ratio {ratios[-1]:.3f}", flush=True)
    cost = 100 * (1 - statistics.median(ratios))
    print(f"deterministic / free-running over {args.rounds} rounds: median "
          f"{statistics.median(ratios):.3f} (range {min(ratios):.3f}-{max(ratios):.3f}); "
          f"cost {cost:.1f} % (default of the actor confs if <= 5 %)")


if __name__ == "__main__":
    main()
