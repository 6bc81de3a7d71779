"""Plots a run's learning curve from its TensorBoard events (as TensorBoard itself reads them).

    python bench/plot_learning_curve.py --root_dir runs/impala_atari \
        --out docs/pong_learning_curve.png [--tag Metrics_vs_EnvironmentSteps/AverageReturn]

The x-axis is frames (agent steps x ``--frameskip``) for ``..._vs_EnvironmentSteps`` tags.
Needs matplotlib (``pip install -e ".[bench]"``).
"""

import argparse
from pathlib import Path

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator


def read_scalars(root_dir: Path, tag: str):
    """``(steps, values, wall_times)`` of ``tag`` over every event file of ``root_dir/train``."""
    points = {}
    for f in sorted((root_dir / "train").glob("events.out.tfevents.*")):
        acc = EventAccumulator(str(f), size_guidance={"scalars": 0})
        acc.Reload()
        if tag in acc.Tags()["scalars"]:
            for e in acc.Scalars(tag):
                points[e.step] = (e.value, e.wall_time)
    steps = sorted(points)
    return steps, [points[s][0] for s in steps], [points[s][1] for s in steps]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--root_dir", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--tag", default="Metrics_vs_EnvironmentSteps/AverageReturn")
    p.add_argument("--frameskip", type=int, default=4)
    p.add_argument("--title", default="IMPALA (rlf), ALE/Pong-v5, 2 CPU cores")
    args = p.parse_args()
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    steps, values, walls = read_scalars(Path(args.root_dir), args.tag)
    if not steps:
        raise SystemExit(f"no '{args.tag}' events under {args.root_dir}/train")
    frames = [s * args.frameskip for s in steps]
    minutes = [(w - walls[0]) / 60 for w in walls]
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot([f / 1e6 for f in frames], values)
    ax.set_xlabel("frames (millions)")
    ax.set_ylabel("average return (last episodes)")
    ax.set_title(args.title)
    ax.grid(alpha=0.3)
    top = ax.secondary_xaxis("top", functions=(
        lambda x: x * (minutes[-1] / max(frames[-1] / 1e6, 1e-9)),
        lambda m: m / (minutes[-1] / max(frames[-1] / 1e6, 1e-9))))
    top.set_xlabel("wall-clock minutes (approx.)")
    fig.tight_layout()
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.out, dpi=100)
    print(f"{args.out}: {len(steps)} points, last {values[-1]:.2f} at {frames[-1]} frames, "
          f"{minutes[-1]:.1f} min, best {max(values):.2f}")


if __name__ == "__main__":
    main()
