"""A window that shows an episode's frames as they come (``rlf.bin.play --render human``),
drawn with pygame (the ``play`` extra)."""

from __future__ import annotations

import os
from typing import Any, Optional

import numpy as np

from rlf.utils.errors import UserError
from rlf.utils.extras import require

__all__ = ["FrameWindow", "check_display"]


def check_display() -> None:
    """Refuses a window where there is no display.

    Raises:
        UserError: naming the variables looked at and the way to see the episode anyway.
    """
    if not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
        raise UserError("--render human needs a display, and neither DISPLAY nor "
                        "WAYLAND_DISPLAY is set; record the episode instead (--record "
                        "episode.gif)")


class FrameWindow:
    """Shows ``[H, W]`` or ``[H, W, 3]`` uint8 frames in a window, at most ``fps`` a second.

    Args:
        title: the window's title.
        fps: frames per second.

    Raises:
        MissingExtraError: without pygame (``pip install -e '.[play]'``).
    """

    def __init__(self, title: str, fps: int = 30):
        self._pygame: Any = require("pygame", "play", "--render human")
        self._pygame.init()
        self._title, self._fps = title, fps
        self._screen: Optional[Any] = None
        self._clock = self._pygame.time.Clock()
        self.shown = 0

    def show(self, frame: np.ndarray) -> None:
        """Draws ``frame`` (the window takes the first frame's size) and waits out the
        frame's share of a second."""
        pygame = self._pygame
        rgb = np.repeat(frame[..., None], 3, -1) if frame.ndim == 2 else frame
        surface = pygame.surfarray.make_surface(np.ascontiguousarray(rgb.swapaxes(0, 1)))
        if self._screen is None:
            self._screen = pygame.display.set_mode(surface.get_size())
            pygame.display.set_caption(self._title)
        self._screen.blit(surface, (0, 0))
        pygame.display.flip()
        pygame.event.pump()  # the window stays responsive
        self._clock.tick(self._fps)
        self.shown += 1

    def close(self) -> None:
        """Closes the window."""
        self._pygame.quit()
