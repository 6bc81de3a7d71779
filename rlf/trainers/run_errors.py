"""The ways a run ends early that its driver tells apart: a checkpoint that does not fit, one
that cannot be written, an actor that failed."""

from __future__ import annotations

from rlf.utils.errors import UserError

__all__ = ["CheckpointMismatchError", "CheckpointWriteError", "ActorFailure"]


class CheckpointMismatchError(UserError):
    """The checkpoint in root_dir does not fit the configured algorithm."""


class CheckpointWriteError(RuntimeError):
    """A checkpoint could not be written (a full disk, a file system gone read-only) and
    training stopped; the message names the file, the cause and the last good checkpoint,
    which is kept, as is everything written before."""


class ActorFailure(RuntimeError):
    """An actor failed (or failed too often) and training stopped after writing a
    checkpoint; the message names the actor, the cause, its log and the checkpoint.

    Args:
        message: the line.
        caused_by_input: the actor raised a ``UserError`` (``ActorError.caused_by_input``):
            ``rlf.bin.train`` then exits with status 2, as for the same error without actors.
    """

    def __init__(self, message: str, caused_by_input: bool = False):
        super().__init__(message)
        self.caused_by_input = bool(caused_by_input)
