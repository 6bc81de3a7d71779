"""TensorBoard summaries over ``torch.utils.tensorboard.SummaryWriter``, ALF style.

One process-wide default writer and one global counter (the training iteration). Code anywhere
in rlf writes ``summary.scalar("loss", x)``; nothing is written unless a writer is set and
summaries are enabled for the current iteration (``record_if``), so library code can call these
functions unconditionally at almost no cost.

Typical use (the ``Trainer`` does this):

    summary.set_default_writer(summary.create_summary_writer(root_dir + "/train"))
    summary.set_summary_interval(100)   # record on iterations 0, 100, 200, ...
    for _ in range(n):
        algorithm.train_iter()          # advances the counter, calls summary.scalar(...)

``train_iter`` advances the global counter itself (once per iteration, or once per mini-batch
with ``TrainerConfig.update_counter_every_mini_batch``): a caller that also increments it
around ``train_iter`` counts each iteration twice.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import threading
import time
from collections import defaultdict
from typing import TYPE_CHECKING, Callable, Dict, Iterator, List, Optional, Union

import torch

logger = logging.getLogger(__name__)

if TYPE_CHECKING:  # (imported where a writer is made: ~0.4 s a process that writes none)
    from torch.utils.tensorboard import SummaryWriter

__all__ = [
    "SummaryWriteError", "create_summary_writer", "set_default_writer", "get_default_writer",
    "get_global_counter", "set_global_counter", "increment_global_counter", "add_mirror",
    "remove_mirror", "set_summary_interval", "record_if", "is_active",
    "should_record_summaries", "enable_summary", "scalar", "histogram", "text", "video",
    "record_time",
    "flush", "close", "DiscardingWriter",
]

_writer: Optional[Union[SummaryWriter, "DiscardingWriter"]] = None
_global_counter = 0
_summary_interval = 1
_enabled = True
_record_if_fn: Optional[Callable[[], bool]] = None
_timers: Dict[str, float] = defaultdict(float)
#: Called with (tag, value, step) for every scalar recorded (an experiment tracker).
_mirrors: List[Callable[[str, float, int], None]] = []


class SummaryWriteError(OSError):
    """The event file could not be written (a full disk): the writer's ``OSError`` with the
    directory named, raised by ``scalar``, ``histogram``, ``text``, ``flush`` and ``close``.
    Its message is ``strerror`` alone (no ``[Errno N]``)."""

    def __str__(self) -> str:
        return str(self.strerror)


def _quiet_writer_thread_errors(args) -> None:
    """``threading.excepthook`` that leaves out an ``OSError`` of TensorBoard's writer
    thread: the thread keeps it, and the next write raises it as ``SummaryWriteError`` in
    the caller's thread; anything else goes to the previous hook."""
    if isinstance(args.exc_value, OSError) and type(args.thread).__name__ == \
            "_AsyncWriterThread":
        return
    _previous_excepthook(args)


_previous_excepthook = threading.excepthook


@contextlib.contextmanager
def _writing() -> Iterator[None]:
    """Turns the writer's ``OSError`` (its worker thread's, re-raised by the next call) into
    ``SummaryWriteError`` naming the event directory."""
    try:
        yield
    except SummaryWriteError:
        raise
    except OSError as e:
        where = getattr(_writer, "log_dir", None) or "the event directory"
        raise SummaryWriteError(e.errno, f"could not write the TensorBoard summaries in "
                                         f"{where}: {e.strerror or e}") from e


def create_summary_writer(logdir: str, flush_secs: int = 10, max_queue: int = 100,
                          purge_step: Optional[int] = None) -> SummaryWriter:
    """A ``SummaryWriter`` writing event files under ``logdir`` (created if missing).

    Args:
        logdir: directory of the event files (e.g. ``root_dir/train``).
        flush_secs: seconds between flushes to disk.
        max_queue: events buffered before a forced flush.
        purge_step: if given, the new event file starts with TensorBoard's restart marker
            (a ``SessionLog.START`` event at this step): TensorBoard, and
            ``rlf.utils.tensorboard_reader``, then hide every event of the directory's earlier
            files whose step is ``>= purge_step``, whatever its tag (the files stay on disk).

    The new file is named after every event file already in ``logdir`` (``_after_existing``),
    so that TensorBoard, which reads a directory's files in name order, reads it last.
    """
    if threading.excepthook is not _quiet_writer_thread_errors:
        threading.excepthook = _quiet_writer_thread_errors
    from torch.utils.tensorboard import SummaryWriter
    _after_existing(logdir)
    return SummaryWriter(logdir, flush_secs=flush_secs, max_queue=max_queue,
                         purge_step=purge_step)


#: An event file's name: ``events.out.tfevents.<unix seconds>.<host>.<pid>.<writer number>``.
_EVENT_FILE = re.compile(r"^events\.out\.tfevents\.(\d+)\.")


def _after_existing(logdir: str) -> None:
    """Waits, if needed, until an event file created now sorts after each one in ``logdir``.

    TensorBoard (and ``rlf.utils.tensorboard_reader``) reads a directory's event files in
    name order, and the name starts with the creation time in whole seconds, then the host,
    the process id and a per-process writer number as unpadded decimals: two files of the same
    second can sort against their order of creation (writer 10 before writer 9, process 10000
    before 9999), and the earlier run's events would then hide the later run's instead of the
    reverse. So while a file of the current second (or of the next, from a clock set back) is
    there, this sleeps into the second after it: at most about 1 s (2 s), for a run resumed or
    restarted within a second of the last one. A file further ahead of the clock is only
    warned about.
    """
    try:
        names = os.listdir(logdir)
    except OSError:  # not made yet: nothing to sort after
        return
    seconds = [int(m.group(1)) for m in map(_EVENT_FILE.match, names) if m]
    latest = max(seconds, default=0)
    now = time.time()
    if latest > now + 1:
        logger.warning("%s holds an event file dated %d s ahead of this machine's clock: "
                       "TensorBoard will read it after this run's", logdir, int(latest - now))
    elif latest >= int(now):
        time.sleep(latest + 1 - now)


class DiscardingWriter:
    """A writer that writes nothing, for the learners of a data-parallel run other than
    rank 0: they compute the same summaries at the same steps (averaging the losses over the
    learners is a collective every rank takes part in), and only rank 0's reach the files."""

    def add_scalar(self, *args, **kwargs) -> None:
        """Discards a scalar."""

    def add_histogram(self, *args, **kwargs) -> None:
        """Discards a histogram."""

    def add_text(self, *args, **kwargs) -> None:
        """Discards a text."""


    def flush(self) -> None:
        """Nothing to flush."""

    def close(self) -> None:
        """Nothing to close."""


def set_default_writer(writer: Optional[Union[SummaryWriter, "DiscardingWriter"]]) -> None:
    """Sets the writer used by ``scalar``/``histogram``; None stops writing."""
    global _writer
    _writer = writer


def get_default_writer() -> Optional[Union[SummaryWriter, DiscardingWriter]]:
    """The current default writer or None."""
    return _writer


def get_global_counter() -> int:
    """The global step that summaries are written against (the training iteration)."""
    return _global_counter


def set_global_counter(value: int) -> None:
    """Sets the global counter (e.g. after restoring a checkpoint)."""
    global _global_counter
    _global_counter = int(value)


def increment_global_counter() -> int:
    """Adds 1 to the global counter and returns the new value."""
    global _global_counter
    _global_counter += 1
    return _global_counter


def set_summary_interval(interval: int) -> None:
    """Records summaries when ``global_counter % interval == 0``.

    Raises:
        ValueError: if ``interval < 1``.
    """
    global _summary_interval
    if interval < 1:
        raise ValueError(f"summary_interval must be >= 1, got {interval}")
    _summary_interval = int(interval)


def enable_summary(flag: bool) -> None:
    """Turns all summaries on or off (e.g. off inside evaluation)."""
    global _enabled
    _enabled = bool(flag)


@contextlib.contextmanager
def record_if(fn: Callable[[], bool]) -> Iterator[None]:
    """Within the block, record exactly when ``fn()`` is true (overrides the interval)."""
    global _record_if_fn
    old, _record_if_fn = _record_if_fn, fn
    try:
        yield
    finally:
        _record_if_fn = old


def is_active() -> bool:
    """Whether summaries are written at all (a writer is set and summaries are enabled),
    whatever the interval: values kept for a later summary step are worth computing."""
    return _writer is not None and _enabled


def should_record_summaries() -> bool:
    """Whether a summary written now would be recorded."""
    if _writer is None or not _enabled:
        return False
    if _record_if_fn is not None:
        return bool(_record_if_fn())
    return _global_counter % _summary_interval == 0


def _to_float(value) -> float:
    if isinstance(value, torch.Tensor):
        return float(value.detach().float().mean()) if value.numel() != 1 else float(value)
    return float(value)


def scalar(name: str, value, step: Optional[int] = None) -> None:
    """Writes a scalar (a number or a tensor; a tensor of several elements is averaged).

    Args:
        name: the tag, e.g. ``"loss/pg_loss"``.
        value: number or tensor.
        step: x-axis value; the global counter if None.

    Raises:
        SummaryWriteError: if the event file cannot be written (also ``histogram``,
            ``text``).
    """
    if should_record_summaries():
        value = _to_float(value)
        step = _global_counter if step is None else int(step)
        with _writing():
            assert _writer is not None  # should_record_summaries: a writer is set
            _writer.add_scalar(name, value, step)
        for mirror in _mirrors:
            mirror(name, value, step)


def add_mirror(fn: Callable[[str, float, int], None]) -> None:
    """Calls ``fn(tag, value, step)`` for every scalar recorded from now on, after it is
    written to TensorBoard (``rlf.trainers.tracker`` mirrors them in MLflow or W&B)."""
    _mirrors.append(fn)


def remove_mirror(fn: Callable[[str, float, int], None]) -> None:
    """Stops calling ``fn`` (``add_mirror``); a function not added is ignored."""
    if fn in _mirrors:
        _mirrors.remove(fn)


def histogram(name: str, values, step: Optional[int] = None) -> None:
    """Writes a histogram of a tensor's values (ignored if empty)."""
    if should_record_summaries():
        values = torch.as_tensor(values).detach().float().cpu().reshape(-1)
        if values.numel():
            with _writing():
                assert _writer is not None  # should_record_summaries: a writer is set
                _writer.add_histogram(name, values,
                                      _global_counter if step is None else int(step))


def text(name: str, value: str, step: Optional[int] = None) -> None:
    """Writes a text summary (e.g. the operative gin config)."""
    if _writer is not None and _enabled:
        with _writing():
            _writer.add_text(name, value, _global_counter if step is None else int(step))


def video(name: str, frames, fps: int = 30, step: Optional[int] = None) -> None:
    """Writes an animated GIF of ``frames`` (``[H, W]`` or ``[H, W, 3]`` uint8 arrays) as an
    image summary, which TensorBoard's Images tab plays (what ``SummaryWriter.add_video``
    writes, encoded by Pillow instead of moviepy); whatever the summary interval.

    Args:
        name: the tag, e.g. ``"Eval/video"``.
        frames: the frames, in order (at least one).
        fps: frames per second.
        step: x-axis value; the global counter if None.

    Raises:
        SummaryWriteError: if the event file cannot be written.
    """
    if _writer is None or isinstance(_writer, DiscardingWriter) or not _enabled or not frames:
        return
    import io

    from PIL import Image
    from tensorboard.compat.proto.summary_pb2 import Summary
    images = [Image.fromarray(f) for f in frames]
    buffer = io.BytesIO()
    images[0].save(buffer, format="GIF", save_all=True, append_images=images[1:],
                   duration=max(1, round(1000 / fps)), loop=0)
    height, width = frames[0].shape[:2]
    image = Summary.Image(height=height, width=width,
                          colorspace=3 if frames[0].ndim == 3 else 1,
                          encoded_image_string=buffer.getvalue())
    with _writing():  # (torch's add_video writes the same summary through its file writer)
        _writer._get_file_writer().add_summary(
            Summary(value=[Summary.Value(tag=name, image=image)]),
            _global_counter if step is None else int(step))


@contextlib.contextmanager
def record_time(name: str) -> Iterator[None]:
    """Measures the wall time of the block and writes it as scalar ``name`` (seconds).

    The time is also added to ``accumulated_times()[name]`` whether or not summaries are
    recorded, so the trainer can report where time goes.
    """
    t0 = time.perf_counter()
    try:
        yield
    finally:
        dt = time.perf_counter() - t0
        _timers[name] += dt
        scalar(name, dt)


def add_time(name: str, seconds: float) -> None:
    """Adds ``seconds`` to the accumulated time of ``name`` and writes it as a scalar."""
    _timers[name] += seconds
    scalar(name, seconds)


def accumulated_times(reset: bool = False) -> Dict[str, float]:
    """Seconds spent in each ``record_time`` block since the last reset."""
    out = dict(_timers)
    if reset:
        _timers.clear()
    return out


def flush() -> None:
    """Flushes the default writer.

    Raises:
        SummaryWriteError: if the event file cannot be written.
    """
    if _writer is not None:
        with _writing():
            _writer.flush()


def close() -> None:
    """Closes and unsets the default writer (also when closing fails).

    Raises:
        SummaryWriteError: if the event file cannot be written.
    """
    global _writer
    try:
        if _writer is not None:
            with _writing():
                _writer.close()
    finally:
        _writer = None
