"""Population-based training against fixed learning rates, on Ray Tune:

PPO on CartPole-v1 (confs/ppo_cartpole.gin without its learning-rate decay) started from four
poor Adam learning rates (1e-5, 2e-5, 3e-5, 5e-5), each trial 100k environment steps. The
fixed population keeps them; the PBT population (``--scheduler pbt``) lets its worst trial
clone the best one's exact checkpoint every 20 iterations and perturb (x0.8, x1.2) or redraw
(log-uniform over [1e-5, 1e-2]) its learning rate. Both use the same total environment steps
(4 x 100k). Each repeat uses another environment seed and PBT decision seed.

Prints per repeat the best trial's and the population's mean final ``AverageReturn`` (the mean
of the last 10 training episodes at 100k steps), then the median and range over the repeats;
writes the lineage plot of the first PBT repeat (learning rate and return against environment
steps, each clone marked) to ``--plot``. The four trials of a population run at once (Ray is
given four logical CPUs): on fewer cores they share them.

    python bench/pbt_cartpole.py [--repeats 3] [--root_dir runs/pbt_cartpole] \
        [--plot docs/images/pbt_lineage.png]
"""

import argparse
import random
import statistics
import time
from pathlib import Path

import numpy as np

from rlf.experiments.clone import read_lineage
from rlf.experiments.runner import ExperimentOptions, run_experiment
from rlf.experiments.space import SearchSpace
from rlf.utils.tensorboard_reader import read_scalar_tags

RETURN = "Metrics_vs_EnvironmentSteps/AverageReturn"
LR = "Experiment/torch.optim.Adam.lr"
START = "torch.optim.Adam.lr=[1e-5, 2e-5, 3e-5, 5e-5]"


def finals(root: Path):
    """The final AverageReturn of each trial of the experiment in ``root``."""
    out = {}
    for run in sorted(p for p in root.iterdir() if (p / "train").is_dir()):
        _, values, _ = read_scalar_tags(run / "train", [RETURN])[RETURN]
        out[run.name] = values[-1]
    return out


def plot_lineage(root: Path, out: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, (ax_lr, ax_ret) = plt.subplots(2, 1, figsize=(8, 6), sharex=True)
    runs = sorted(p for p in root.iterdir() if (p / "train").is_dir())
    for i, run in enumerate(runs):
        series = read_scalar_tags(run / "train", [LR, RETURN])
        color = f"C{i}"
        lr_steps, lrs, _ = series[LR]
        ret_steps, rets, _ = series[RETURN]
        end = ret_steps[-1] if ret_steps else lr_steps[-1]
        ax_lr.step(list(lr_steps) + [end], list(lrs) + [lrs[-1]], where="post", color=color,
                   label=run.name.split("_", 1)[0])
        ax_ret.plot(ret_steps, rets, color=color, linewidth=1.0)
        for event in read_lineage(run)["events"]:
            x = event["restored"]["env_steps"]
            ax_lr.plot([x], [event["restored"]["lr"][0][0]], "o", color=color, markersize=4)
            ax_ret.axvline(x, color=color, alpha=0.15, linewidth=0.8)
    ax_lr.set_yscale("log")
    ax_lr.set_ylabel("Adam learning rate")
    ax_lr.legend(title="trial", fontsize=8, loc="upper left")
    ax_ret.set_ylabel("AverageReturn (last 10 episodes)")
    ax_ret.set_xlabel("environment steps")
    ax_lr.set_title("PBT on CartPole-v1 (PPO): learning rates and returns; dots and lines: "
                    "clones", fontsize=9)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=100)
    plt.close(fig)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--root_dir", default="runs/pbt_cartpole")
    p.add_argument("--plot", default="docs/images/pbt_lineage.png")
    args = p.parse_args()
    import ray
    # The four trials of a population run at once (a population whose members wait for each
    # other's slots would not be one): four logical CPUs, whatever the machine has.
    ray.init(address="local", num_cpus=4, include_dashboard=False, log_to_driver=False)
    root = Path(args.root_dir)
    rows = []
    for r in range(args.repeats):
        base = ["PPOAlgorithm.lr_scheduler=None", "TrainerConfig.evaluate=False",
                f"TrainerConfig.random_seed={r}"]
        result = {}
        for kind in ("fixed", "pbt"):
            random.seed(r)
            np.random.seed(r)
            space = SearchSpace.from_flags(
                grids=[START],
                samples=["torch.optim.Adam.lr=loguniform(1e-5, 1e-2)"] if kind == "pbt" else [])
            t0 = time.time()
            run_experiment(ExperimentOptions(
                conf="confs/ppo_cartpole.gin", root_dir=str(root / f"{kind}{r}"), space=space,
                conf_params=base, scheduler="fifo" if kind == "fixed" else "pbt",
                metric="AverageReturn", step_iterations=10, perturbation_interval=2,
                quantile_fraction=0.25), verbose=0)
            values = finals(root / f"{kind}{r}")
            result[kind] = (max(values.values()), statistics.mean(values.values()),
                            time.time() - t0)
            print(f"repeat {r} {kind}: " + ", ".join(f"{k.split('_', 1)[0]} {v:.1f}"
                                                    for k, v in values.items())
                  + f" ({result[kind][2] / 60:.1f} min)", flush=True)
        rows.append(result)
    print("\n| population | best final return: median [min, max] | population mean: "
          "median [min, max] |\n|---|---|---|")
    for kind in ("fixed", "pbt"):
        best = [row[kind][0] for row in rows]
        mean = [row[kind][1] for row in rows]
        print(f"| {kind} | {statistics.median(best):.1f} [{min(best):.1f}, {max(best):.1f}] | "
              f"{statistics.median(mean):.1f} [{min(mean):.1f}, {max(mean):.1f}] |")
    plot_lineage(root / "pbt0", Path(args.plot))
    print(f"wrote {args.plot}")


if __name__ == "__main__":
    main()
