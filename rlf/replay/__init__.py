"""Replay: the ring-buffer ReplayBuffer of nested experience, the samplers it draws with
(uniform, prioritised, hindsight-relabelled) and their SumTree."""

from rlf.replay.hindsight import HindsightReplayBuffer
from rlf.replay.replay_buffer import BatchInfo, ReplayBuffer
from rlf.replay.samplers import HindsightSampler, PrioritizedSampler, Sampler, UniformSampler
from rlf.replay.sum_tree import SumTree

__all__ = ["BatchInfo", "HindsightReplayBuffer", "HindsightSampler", "PrioritizedSampler",
           "ReplayBuffer", "Sampler", "SumTree", "UniformSampler"]
