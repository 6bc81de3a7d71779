"""The training loop around ``RLAlgorithm.train_iter``: the ``Trainer``, the run directory,
the unroller it builds (``make_unroller``, ``ActorSetup``) and evaluation."""

from rlf.trainers.actor_setup import ActorSetup
from rlf.trainers.evaluator import evaluate_episodes
from rlf.trainers.run_dir import RunDirectoryError, check_run_directory
from rlf.trainers.trainer import (ActorFailure, CheckpointMismatchError, CheckpointWriteError,
                                  Trainer)
from rlf.trainers.unrollers import make_unroller

__all__ = ["ActorFailure", "ActorSetup", "CheckpointMismatchError", "CheckpointWriteError",
           "RunDirectoryError", "Trainer", "check_run_directory", "evaluate_episodes",
           "make_unroller"]
