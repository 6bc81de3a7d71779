"""SAC's learning targets, read back from TensorBoard:

- Pendulum-v1 (confs/sac_pendulum.gin, seeds 0, 1, 2): the training ``AverageReturn`` (the
  mean of the last 10 episodes) >= -200 within 15k environment steps;
- with ``--mujoco``: HalfCheetah-v5 (confs/sac_mujoco.gin, one seed): ``AverageReturn``
  >= 3,000 at 100k environment steps (the greedy evaluation printed beside it).

    python bench/sac_learning.py [--seeds 0 1 2] [--conf_param ...]
    python bench/sac_learning.py --mujoco --seeds 0 --root_dir runs/sac_halfcheetah

For scale: published SAC reaches roughly 3,000-5,000 on HalfCheetah at 100k steps
(Haarnoja et al. 2018, fig. 1; rl-baselines3-zoo).
"""

import argparse

import learning


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--mujoco", action="store_true", help="HalfCheetah instead of Pendulum")
    p.add_argument("--seeds", type=int, nargs="+", default=None)
    p.add_argument("--root_dir", default=None, help="keep the (single) run here")
    p.add_argument("--conf_param", action="append", default=[])
    args = p.parse_args()
    if args.mujoco:
        conf, target, within = "confs/sac_mujoco.gin", 3000.0, 100_000
        seeds = args.seeds or [0]
    else:
        conf, target, within = "confs/sac_pendulum.gin", -200.0, 15_000
        seeds = args.seeds or [0, 1, 2]
    met = 0
    for seed in seeds:
        run = learning.train(conf, seed, args.conf_param, root_dir=args.root_dir)
        first = learning.first_at_least(run.steps, run.train, target)
        at = learning.value_at(run.steps, run.train, within)
        ok = first is not None and first <= within
        met += ok
        print(f"seed {seed}: AverageReturn first >= {target:g} at "
              f"{first if first is not None else 'never'} env steps, {at:.1f} at {within}; "
              f"evaluations {[round(v) for v in run.evals]} at {run.eval_steps}; "
              f"{run.seconds / 60:.1f} min ({'met' if ok else 'NOT met'})", flush=True)
    print(f"{met} of {len(seeds)} seeds meet the target (AverageReturn >= {target:g} within "
          f"{within} env steps)")


if __name__ == "__main__":
    main()
