"""The training loop around ``RLAlgorithm.train_iter`` and evaluation."""

from rlf.trainers.evaluator import evaluate_episodes
from rlf.trainers.trainer import CheckpointMismatchError, Trainer

__all__ = ["CheckpointMismatchError", "Trainer", "evaluate_episodes"]
