"""Replay: the ring-buffer ReplayBuffer of nested experience and its SumTree."""

from rlf.replay.replay_buffer import BatchInfo, ReplayBuffer
from rlf.replay.sum_tree import SumTree

__all__ = ["BatchInfo", "ReplayBuffer", "SumTree"]
