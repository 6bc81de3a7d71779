"""PPO's learning targets, read back from TensorBoard:

- CartPole-v1 (confs/ppo_cartpole.gin, seeds 0, 1, 2): the final training ``AverageReturn``
  (the mean of the last 10 episodes) >= 475 within 100k environment steps, for every seed;
- with ``--atari``: Pong (confs/ppo_atari.gin, ALE v5 with sticky actions, one seed): the
  game score (``AverageEpisodeScore``, the last 100 episodes) >= +18 after 10M frames.

    python bench/ppo_learning.py [--seeds 0 1 2] [--conf_param ...]
    python bench/ppo_learning.py --atari --seeds 0 --root_dir runs/ppo_pong

For scale: rl-baselines3-zoo's PPO reaches 500 on CartPole at 100k steps; CleanRL's
``ppo_atari`` and OpenAI baselines' ``ppo2`` reach about +20 on Pong in their default 10M
agent steps (40M frames, without sticky actions), four times this budget.
"""

import argparse

import learning

SCORE_TAG = "Metrics_vs_EnvironmentSteps/AverageEpisodeScore"


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--atari", action="store_true", help="Pong instead of CartPole")
    p.add_argument("--seeds", type=int, nargs="+", default=None)
    p.add_argument("--root_dir", default=None, help="keep the (single) run here")
    p.add_argument("--conf_param", action="append", default=[])
    args = p.parse_args()
    if args.atari:
        conf, tag, target, budget = "confs/ppo_atari.gin", SCORE_TAG, 18.0, 2_500_000
        seeds = args.seeds or [0]
    else:
        conf, tag, target, budget = "confs/ppo_cartpole.gin", learning.TRAIN_TAG, 475.0, 100_000
        seeds = args.seeds or [0, 1, 2]
    met = 0
    for seed in seeds:
        run = learning.train(conf, seed, args.conf_param, root_dir=args.root_dir, train_tag=tag)
        final = learning.value_at(run.steps, run.train, budget)
        first = learning.first_at_least(run.steps, run.train, target)
        ok = final >= target
        met += ok
        evals = f"; last eval {run.evals[-1]:.1f}" if run.evals else ""
        print(f"seed {seed}: {tag.split('/')[-1]} {final:.2f} at {budget} agent steps (first "
              f">= {target:g} at {first if first is not None else 'never'}){evals}; "
              f"{run.seconds / 60:.1f} min ({'met' if ok else 'NOT met'})", flush=True)
    print(f"{met} of {len(seeds)} seeds meet the target ({tag.split('/')[-1]} >= {target:g} "
          f"at {budget} agent steps)")


if __name__ == "__main__":
    main()
