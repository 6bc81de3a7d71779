"""Algorithms: the Algorithm/RLAlgorithm templates, TrainerConfig, and concrete algorithms."""

from rlf.algorithms import optimizers  # noqa: F401  (registers torch.optim classes with gin)
from rlf.algorithms.algorithm import Algorithm, NonFiniteLossError
from rlf.algorithms.config import TrainerConfig
from rlf.algorithms.rl_algorithm import RLAlgorithm, adjust_replay_buffer_length
from rlf.algorithms.impala import ImpalaAlgorithm

__all__ = ["Algorithm", "ImpalaAlgorithm", "NonFiniteLossError", "RLAlgorithm", "TrainerConfig",
           "adjust_replay_buffer_length"]
