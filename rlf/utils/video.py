"""Writing episodes as animated GIF (Pillow) or MP4 (OpenCV)."""

from __future__ import annotations

from pathlib import Path
from typing import List

import numpy as np

__all__ = ["save_video"]


def save_video(frames: List[np.ndarray], path: str, fps: int = 30) -> None:
    """Writes ``[H, W]`` or ``[H, W, 3]`` uint8 frames as an animated GIF (Pillow) or an MP4
    (OpenCV).

    Raises:
        ValueError: for another suffix or no frames.
    """
    if not frames:
        raise ValueError(f"no frames to write to {path}")
    suffix = Path(path).suffix.lower()
    if suffix == ".gif":
        from PIL import Image
        images = [Image.fromarray(f) for f in frames]
        images[0].save(path, save_all=True, append_images=images[1:],
                       duration=int(1000 / fps), loop=0)
    elif suffix == ".mp4":
        import cv2
        h, w = frames[0].shape[:2]
        writer = cv2.VideoWriter(path, cv2.VideoWriter_fourcc(*"mp4v"), fps, (w, h))
        for f in frames:
            writer.write(cv2.cvtColor(f, cv2.COLOR_GRAY2BGR if f.ndim == 2 else cv2.COLOR_RGB2BGR))
        writer.release()
    else:
        raise ValueError(f"--record {path}: use a .gif or .mp4 file name")
