"""The training loop around ``RLAlgorithm.train_iter`` and evaluation."""

from rlf.trainers.evaluator import evaluate_episodes
from rlf.trainers.trainer import (ActorFailure, CheckpointMismatchError, RunDirectoryError,
                                  Trainer, check_run_directory)

__all__ = ["ActorFailure", "CheckpointMismatchError", "RunDirectoryError", "Trainer",
           "check_run_directory", "evaluate_episodes"]
