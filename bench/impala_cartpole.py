"""CartPole-v1 with confs/impala_cartpole.gin, one full run of the conf per seed: when the
training ``AverageReturn`` first reaches 475, and whether the run ends solved (its last
training ``AverageReturn`` and its last evaluation both >= 475).

    python bench/impala_cartpole.py [--seeds 0 1 2] [--conf confs/impala_cartpole.gin]
        [--conf_param ...]

Each run trains as ``rlf.bin.train`` does (process settings included) in a temporary
directory; the figures are read back from its TensorBoard events
(``Metrics_vs_EnvironmentSteps/AverageReturn``: the mean of the last 16 training episodes;
``Eval_vs_EnvironmentSteps/AverageReturn``: the conf's evaluation episodes). The baseline
printed beside them is the criterion itself: 475 (CartPole-v1's reward threshold), first
reached within 150k environment steps.
"""

import argparse
import statistics

import learning

THRESHOLD, MAX_FIRST_CROSSING = 475.0, 150_000


def run(conf, seed, params):
    """Trains one seed; returns ``(first crossing or None, last train, last eval, seconds)``."""
    r = learning.train(conf, seed, params)
    first = learning.first_at_least(r.steps, r.train, THRESHOLD)
    return first, r.train[-1], r.evals[-1] if r.evals else float("nan"), r.seconds


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--conf", default="confs/impala_cartpole.gin")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--conf_param", action="append", default=[])
    args = p.parse_args()
    rows = []
    for seed in args.seeds:
        first, train, evaluation, seconds = run(args.conf, seed, args.conf_param)
        ok = (first is not None and first <= MAX_FIRST_CROSSING and train >= THRESHOLD
              and evaluation >= THRESHOLD)
        rows.append((first, train, evaluation, seconds, ok))
        print(f"seed {seed}: first >= {THRESHOLD:.0f} at "
              f"{first if first is not None else 'never'} env steps; last training "
              f"AverageReturn {train:.1f}, last eval {evaluation:.1f}; {seconds:.0f} s "
              f"({'solved' if ok else 'NOT solved'})", flush=True)
    firsts = [r[0] for r in rows if r[0] is not None]
    print(f"{sum(r[4] for r in rows)} of {len(rows)} seeds end solved; first crossing median "
          f"{statistics.median(firsts) if firsts else 'never'} env steps (criterion: every "
          f"seed's last training and eval AverageReturn >= {THRESHOLD:.0f}, first crossing "
          f"<= {MAX_FIRST_CROSSING})")


if __name__ == "__main__":
    main()
