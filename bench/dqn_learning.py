"""DQN's learning target on CartPole-v1 with confs/dqn_cartpole.gin, seeds 0, 1, 2:
the training ``AverageReturn`` (the mean of the last 10 episodes, epsilon-greedy) first
reaches 475 within 100k environment steps, and is still >= 400 at the end of the conf's run.

    python bench/dqn_learning.py [--seeds 0 1 2] [--conf_param ...]

rl-baselines3-zoo's DQN reaches 500 on CartPole at 50k steps with the same settings.
"""

import argparse
import statistics

import learning

THRESHOLD, WITHIN, END = 475.0, 100_000, 400.0


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--conf", default="confs/dqn_cartpole.gin")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--conf_param", action="append", default=[])
    args = p.parse_args()
    passed, firsts = 0, []
    for seed in args.seeds:
        run = learning.train(args.conf, seed, args.conf_param)
        first = learning.first_at_least(run.steps, run.train, THRESHOLD)
        end = run.train[-1]
        ok = first is not None and first <= WITHIN and end >= END
        passed += ok
        if first is not None:
            firsts.append(first)
        print(f"seed {seed}: first >= {THRESHOLD:.0f} at "
              f"{first if first is not None else 'never'} env steps; AverageReturn at the end "
              f"({run.steps[-1]} steps) {end:.1f}; last greedy evaluation {run.evals[-1]:.1f} "
              f"at {run.eval_steps[-1]} steps; "
              f"{run.seconds:.0f} s ({'met' if ok else 'NOT met'})", flush=True)
    print(f"{passed} of {len(args.seeds)} seeds meet the target (first >= {THRESHOLD:.0f} "
          f"within {WITHIN} steps, >= {END:.0f} at the end); median first crossing "
          f"{statistics.median(firsts) if firsts else 'never'}")


if __name__ == "__main__":
    main()
