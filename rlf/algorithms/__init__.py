"""Algorithms: the Algorithm/RLAlgorithm templates, TrainerConfig, and the built-in algorithms
(IMPALA, PPO, SAC, TD3, DQN, R2D2, IQL)."""

from rlf.algorithms import optimizers  # noqa: F401  (registers torch.optim classes with gin)
from rlf.algorithms.algorithm import Algorithm, NonFiniteLossError, RunArgs, run_args
from rlf.algorithms.builder import build_training
from rlf.algorithms.learner import make_learner
from rlf.algorithms.loops import loop_of
from rlf.algorithms.data_needs import DataNeeds
from rlf.algorithms.memories import NotCheckpointed
from rlf.algorithms.mixing import ExperienceSource
from rlf.algorithms.removed import own_method
from rlf.algorithms.config import TrainerConfig
from rlf.algorithms.rl_algorithm import (RLAlgorithm, adjust_replay_buffer_length,
                                         check_unit_interval)
from rlf.algorithms.dqn import DQNAlgorithm
from rlf.algorithms.impala import ImpalaAlgorithm
from rlf.algorithms.iql import IQLAlgorithm
from rlf.algorithms.ppo import PPOAlgorithm
from rlf.algorithms.r2d2 import R2D2Algorithm
from rlf.algorithms.sac import SACAlgorithm
from rlf.algorithms.td3 import TD3Algorithm
from rlf.algorithms.training_loop import TrainingLoop

__all__ = ["Algorithm", "DQNAlgorithm", "DataNeeds", "ExperienceSource", "IQLAlgorithm",
           "ImpalaAlgorithm",
           "NonFiniteLossError", "NotCheckpointed", "PPOAlgorithm", "R2D2Algorithm",
           "RLAlgorithm", "RunArgs", "SACAlgorithm", "TD3Algorithm", "TrainerConfig",
           "TrainingLoop", "adjust_replay_buffer_length", "build_training",
           "check_unit_interval", "loop_of", "make_learner", "own_method", "run_args"]
