"""Plots a run's learning curve from its TensorBoard events (as TensorBoard itself reads them).

    python bench/plot_learning_curve.py --root_dir runs/impala_atari \
        --out docs/pong_learning_curve.png [--tag Metrics_vs_EnvironmentSteps/AverageReturn]

The x-axis is frames (agent steps x ``--frameskip``) for ``..._vs_EnvironmentSteps`` tags.
Needs matplotlib (``pip install -e ".[bench]"``).
"""

import argparse
from pathlib import Path

from rlf.utils.tensorboard_reader import read_scalars as read_tensorboard_scalars


def read_scalars(root_dir: Path, tag: str):
    """``(steps, values, wall_times)`` of ``tag`` over every event file of ``root_dir/train``."""
    return read_tensorboard_scalars(root_dir / "train", tag)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--root_dir", action="append", required=True,
                   help="a run directory (repeatable: one curve each)")
    p.add_argument("--label", action="append", default=[], help="legend label per run")
    p.add_argument("--out", required=True)
    p.add_argument("--tag", default="Metrics_vs_EnvironmentSteps/AverageReturn")
    p.add_argument("--frameskip", type=int, default=4,
                   help="frames per environment step (1 for non-Atari tasks)")
    p.add_argument("--xlabel", default="frames (millions)")
    p.add_argument("--title", default="IMPALA (rlf), ALE/Pong-v5, 2 CPU cores")
    args = p.parse_args()
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(7, 4))
    # tab10's colours repeat from the 11th run on; tab20 keeps up to 20 runs apart.
    colors = plt.get_cmap("tab10" if len(args.root_dir) <= 10 else "tab20").colors
    for i, root in enumerate(args.root_dir):
        steps, values, walls = read_scalars(Path(root), args.tag)
        if not steps:
            raise SystemExit(f"no '{args.tag}' events under {root}/train")
        frames = [s * args.frameskip for s in steps]
        minutes = (walls[-1] - walls[0]) / 60
        label = args.label[i] if i < len(args.label) else Path(root).name
        ax.plot([f / 1e6 for f in frames], values, color=colors[i % len(colors)],
                label=f"{label} ({minutes:.0f} min, last {values[-1]:.1f})")
        print(f"{root}: {len(steps)} points, last {values[-1]:.2f} at {frames[-1]} frames, "
              f"{minutes:.1f} min, best {max(values):.2f}")
    ax.set_xlabel(args.xlabel)
    ax.set_ylabel("average return (last episodes)")
    ax.set_title(args.title)
    ax.grid(alpha=0.3)
    ax.legend(loc="upper left", fontsize=7)
    fig.tight_layout()
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.out, dpi=100)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
