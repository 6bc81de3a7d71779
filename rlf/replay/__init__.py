"""Replay: the ring-buffer ReplayBuffer of nested experience, its SumTree, and hindsight
relabelling (HindsightReplayBuffer)."""

from rlf.replay.hindsight import HindsightReplayBuffer
from rlf.replay.replay_buffer import BatchInfo, ReplayBuffer
from rlf.replay.sum_tree import SumTree

__all__ = ["BatchInfo", "HindsightReplayBuffer", "ReplayBuffer", "SumTree"]
