"""Writing episodes as animated GIF (Pillow) or MP4 (OpenCV), atomically."""

from __future__ import annotations

import contextlib
import errno
import os
import sys
import tempfile
from pathlib import Path
from typing import Iterator, List, Union

import numpy as np

from rlf.utils.atomic_file import atomic_write
from rlf.utils.extras import require

__all__ = ["VIDEO_SUFFIXES", "check_video_path", "save_video"]

VIDEO_SUFFIXES = (".gif", ".mp4")


def check_video_path(path: Union[str, Path]) -> Path:
    """Checks that a video can be written to ``path`` before any frame is made.

    Returns:
        ``path`` as a ``Path``.

    Raises:
        ValueError: if ``path`` is empty, its suffix is neither ``.gif`` nor ``.mp4``, it is
            a directory, or its folder does not exist or is not writable.
    """
    if not str(path).strip():  # Path('') is '.'
        raise ValueError("the video file name is empty: give a .gif or .mp4 file name")
    path = Path(path)
    if path.suffix.lower() not in VIDEO_SUFFIXES:
        raise ValueError(f"video file {path}: use a .gif or .mp4 file name")
    if path.is_dir():
        raise ValueError(f"video file {path} is a directory; give a file name")
    folder = path.parent
    if not folder.is_dir():
        raise ValueError(f"video file {path}: the folder {folder} does not exist")
    if not os.access(folder, os.W_OK):
        raise ValueError(f"video file {path}: the folder {folder} is not writable")
    try:  # what the access bits allow, a file system may still refuse (/proc, read-only)
        with tempfile.TemporaryFile(dir=folder, prefix=".rlf-video-probe-"):
            pass
    except OSError as e:
        raise ValueError(f"video file {path}: the folder {folder} takes no new file "
                         f"({e.strerror or e})") from None
    return path


@contextlib.contextmanager
def _stderr_silenced() -> Iterator[None]:
    """Points file descriptor 2 at ``/dev/null`` for the block: native libraries (FFmpeg)
    write there directly, past ``sys.stderr``."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def save_video(frames: List[np.ndarray], path: str, fps: int = 30) -> None:
    """Writes ``[H, W]`` or ``[H, W, 3]`` uint8 frames as an animated GIF (Pillow) or an MP4
    (OpenCV), ``fps`` frames per second.

    The video is written to a temporary file beside ``path`` and renamed over it once
    complete, so an interrupted write leaves no half-made ``path``.

    Raises:
        ValueError: for no frames or a path ``check_video_path`` refuses.
        RuntimeError: if OpenCV cannot open an MP4 writer (no ``mp4v`` codec).
        OSError: if the file cannot be written in full (a full disk); OpenCV reports
            nothing then, so the MP4 is read back and its frames counted. ``path`` is left
            as it was.
    """
    checked = check_video_path(path)
    if not frames:
        raise ValueError(f"no frames to write to {checked}")
    suffix = checked.suffix.lower()
    with atomic_write(checked, suffix=suffix) as tmp:  # OpenCV picks the container by suffix
        if suffix == ".gif":
            Image = require("PIL.Image", "play", f"recording {checked.name}")
            images = [Image.fromarray(f) for f in frames]
            images[0].save(tmp, format="GIF", save_all=True, append_images=images[1:],
                           duration=int(1000 / fps), loop=0)
        else:
            import cv2
            h, w = frames[0].shape[:2]
            fourcc = cv2.VideoWriter_fourcc(*"mp4v")  # type: ignore[attr-defined]
            writer = cv2.VideoWriter(str(tmp), fourcc, fps, (w, h))
            if not writer.isOpened():
                raise RuntimeError(f"OpenCV cannot write {checked} with the mp4v codec; "
                                   f"use a .gif file name")
            for f in frames:
                writer.write(cv2.cvtColor(
                    f, cv2.COLOR_GRAY2BGR if f.ndim == 2 else cv2.COLOR_RGB2BGR))
            writer.release()
            with _stderr_silenced():  # FFmpeg's "moov atom not found" for a short file
                reader = cv2.VideoCapture(str(tmp))
                written = int(reader.get(cv2.CAP_PROP_FRAME_COUNT)) if reader.isOpened() else 0
                reader.release()
            if written != len(frames):
                raise OSError(errno.EIO, f"the video could not be written in full ({written} "
                                         f"of {len(frames)} frames readable)", str(checked))
