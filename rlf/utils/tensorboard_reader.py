"""Reading scalars back from a run's TensorBoard event files, with TensorBoard's own reader."""

from __future__ import annotations

from pathlib import Path
from typing import List, Tuple

__all__ = ["read_scalars"]


def read_scalars(event_dir: str | Path, tag: str) -> Tuple[List[int], List[float], List[float]]:
    """``(steps, values, wall_times)`` of ``tag`` over every event file in ``event_dir``
    (a run's ``train/``), by step; a step written twice (a resumed run) keeps the later value.

    Args:
        event_dir: the directory holding ``events.out.tfevents.*`` files.
        tag: e.g. ``"Metrics_vs_EnvironmentSteps/AverageEpisodeScore"``.

    Returns:
        Three equally long lists, ascending in step; empty if the tag was never written.
    """
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    points = {}
    for f in sorted(Path(event_dir).glob("events.out.tfevents.*")):
        acc = EventAccumulator(str(f), size_guidance={"scalars": 0})
        acc.Reload()
        if tag in acc.Tags()["scalars"]:
            for e in acc.Scalars(tag):
                points[e.step] = (e.value, e.wall_time)
    steps = sorted(points)
    return steps, [points[s][0] for s in steps], [points[s][1] for s in steps]
