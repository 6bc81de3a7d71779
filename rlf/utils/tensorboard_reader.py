"""Reading scalars back from a run's TensorBoard event files, with TensorBoard's own reader."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

__all__ = ["Series", "read_scalars", "read_scalar_tags", "read_scalar_segments"]

Series = Tuple[List[int], List[float], List[float]]


def read_scalar_tags(event_dir: str | Path,
                     tags: Optional[Sequence[str]] = None) -> Dict[str, Series]:
    """``{tag: (steps, values, wall_times)}`` for each of ``tags``, parsing the event files of
    ``event_dir`` (a run's ``train/``) once, in order, as TensorBoard does: a file that begins
    with a restart marker (``SessionLog.START`` at step ``s``, written by a resumed or
    restarted run) hides the earlier files' events at steps ``>= s``; a step written twice
    keeps the later value.

    Args:
        event_dir: the directory holding ``events.out.tfevents.*`` files.
        tags: e.g. ``["Metrics_vs_EnvironmentSteps/AverageEpisodeScore"]``; None: every
            scalar tag written.

    Returns:
        Per tag, three equally long lists, ascending in step; empty if the tag was never
        written or ``event_dir`` does not exist.
    """
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    if not Path(event_dir).is_dir():
        return {tag: ([], [], []) for tag in tags or ()}
    acc = EventAccumulator(str(event_dir), size_guidance={"scalars": 0})
    quiet = _DropPurgeWarning()
    tb_logger = logging.getLogger("tensorboard")
    tb_logger.addFilter(quiet)
    try:
        acc.Reload()
    finally:
        tb_logger.removeFilter(quiet)
    written = set(acc.Tags()["scalars"])
    if tags is None:
        tags = sorted(written)
    return {tag: _series(acc, tag) if tag in written else ([], [], []) for tag in tags}


def _series(acc, tag: str) -> Series:
    """``tag``'s points in a reloaded ``EventAccumulator``, ascending in step; a step written
    twice keeps the later value."""
    points = {e.step: (e.value, e.wall_time) for e in acc.Scalars(tag)}
    steps = sorted(points)
    return steps, [points[s][0] for s in steps], [points[s][1] for s in steps]


class _DropPurgeWarning(logging.Filter):
    """Drops TensorBoard's warning for each purge ("Detected out of order event.step likely
    caused by a TensorFlow restart..."): for rlf's runs a purge is the expected result of a
    resume, not news."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith("Detected out of order event.step")


def read_scalars(event_dir: str | Path, tag: str) -> Series:
    """``(steps, values, wall_times)`` of ``tag`` over the event files of ``event_dir`` (a
    run's ``train/``), by step, as ``read_scalar_tags`` reads them.

    Args:
        event_dir: the directory holding ``events.out.tfevents.*`` files.
        tag: e.g. ``"Metrics_vs_EnvironmentSteps/AverageEpisodeScore"``.

    Returns:
        Three equally long lists, ascending in step; empty if the tag was never written.
    """
    return read_scalar_tags(event_dir, [tag])[tag]


def read_scalar_segments(event_dir: str | Path, tag: str) -> List[Series]:
    """``(steps, values, wall_times)`` of ``tag`` in each event file of ``event_dir`` alone,
    in the files' (time) order: one segment per process that wrote the run, so that the wall
    time between a stop and a resume can be left out of a run's duration.

    Args:
        event_dir: the directory holding ``events.out.tfevents.*`` files.
        tag: e.g. ``"Metrics_vs_EnvironmentSteps/AverageEpisodeScore"``.

    Returns:
        One series per file that holds ``tag``, each ascending in step (a step written twice
        keeps the later value); empty if none does or ``event_dir`` does not exist.
    """
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    segments = []
    for path in sorted(Path(event_dir).glob("events.out.tfevents.*")):
        acc = EventAccumulator(str(path), size_guidance={"scalars": 0})
        acc.Reload()
        if tag in acc.Tags()["scalars"]:
            segments.append(_series(acc, tag))
    return segments
