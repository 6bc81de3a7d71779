"""Reading scalars back from a run's TensorBoard event files, with TensorBoard's own reader."""

from __future__ import annotations

from pathlib import Path
from typing import Dict, List, Sequence, Tuple

__all__ = ["Series", "read_scalars", "read_scalar_tags"]

Series = Tuple[List[int], List[float], List[float]]


def read_scalar_tags(event_dir: str | Path, tags: Sequence[str]) -> Dict[str, Series]:
    """``{tag: (steps, values, wall_times)}`` for each of ``tags``, parsing every event file
    in ``event_dir`` (a run's ``train/``) once; a step written twice (a resumed run) keeps the
    later value.

    Args:
        event_dir: the directory holding ``events.out.tfevents.*`` files.
        tags: e.g. ``["Metrics_vs_EnvironmentSteps/AverageEpisodeScore"]``.

    Returns:
        Per tag, three equally long lists, ascending in step; empty if the tag was never
        written.
    """
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    points = {tag: {} for tag in tags}
    for f in sorted(Path(event_dir).glob("events.out.tfevents.*")):
        acc = EventAccumulator(str(f), size_guidance={"scalars": 0})
        acc.Reload()
        written = set(acc.Tags()["scalars"])
        for tag in points:
            if tag in written:
                for e in acc.Scalars(tag):
                    points[tag][e.step] = (e.value, e.wall_time)
    out = {}
    for tag, p in points.items():
        steps = sorted(p)
        out[tag] = (steps, [p[s][0] for s in steps], [p[s][1] for s in steps])
    return out


def read_scalars(event_dir: str | Path, tag: str) -> Series:
    """``(steps, values, wall_times)`` of ``tag`` over every event file in ``event_dir``
    (a run's ``train/``), by step; a step written twice (a resumed run) keeps the later value.

    Args:
        event_dir: the directory holding ``events.out.tfevents.*`` files.
        tag: e.g. ``"Metrics_vs_EnvironmentSteps/AverageEpisodeScore"``.

    Returns:
        Three equally long lists, ascending in step; empty if the tag was never written.
    """
    return read_scalar_tags(event_dir, [tag])[tag]
