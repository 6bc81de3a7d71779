"""The trainer's own part of a run checkpoint (``TrainerState``)."""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional

from rlf.algorithms.counters import Counters
from rlf.utils import distributed, summary

__all__ = ["TrainerState"]


class TrainerState:
    """What the trainer checkpoints beside the algorithm: the summary step, the tracked run,
    the shared generators of several learners, the memories no checkpoint holds, the best
    evaluation so far, and for readers of the checkpoint copies of the algorithm's counters.

    The run's iterations and environment steps are the algorithm's counters
    (``Counters.train_iter_num``, ``Counters.env_steps``), the one count of each; the
    checkpoint's ``"iter_num"`` and ``"env_steps"`` are copies of them, read back only to
    upgrade a checkpoint whose algorithm part lacks its iteration count.

    Args:
        world: the learners of the run.
    """

    def __init__(self, world: distributed.World):
        self.world = world
        self.counters: Optional[Counters] = None  # the algorithm's, once built
        self.tracker_run_id: Optional[str] = None
        # the algorithm's memories that checkpoints do not hold, and those of the restored run
        self.not_checkpointed: Callable[[], List[str]] = lambda: []
        self.restored_not_checkpointed: List[str] = []
        # the best evaluation of the run so far (ckpt/best.pt holds its policy), or None
        self.best_eval: Optional[float] = None

    @property
    def iter_num(self) -> int:
        """The training iterations of the run (``Counters.train_iter_num``; 0 before the
        build)."""
        return 0 if self.counters is None else self.counters.train_iter_num

    def env_steps(self) -> int:
        """The environment steps of the run (``Counters.env_steps``; 0 before the build)."""
        return 0 if self.counters is None else self.counters.env_steps

    def state_dict(self) -> Dict[str, Any]:
        """``{"iter_num", "global_counter", "env_steps"}``: the summary step, and the
        iterations and environment steps for readers of the checkpoint
        (``run_dir.checkpointed_env_steps``; the algorithm restores its own counts); with a
        tracker also ``"tracker_run_id"``; with several learners also ``"num_learners"`` and
        ``"shared_rng"`` (the states of the generators of batch draws,
        ``rlf.utils.distributed``); with memories in ``NotCheckpointed`` holders,
        ``"not_checkpointed"`` (their paths)."""
        state: Dict[str, Any] = {"iter_num": self.iter_num,
                                 "global_counter": summary.get_global_counter(),
                                 "env_steps": int(self.env_steps())}
        memories = self.not_checkpointed()
        if memories:
            state["not_checkpointed"] = memories
        if self.tracker_run_id is not None:
            state["tracker_run_id"] = self.tracker_run_id
        world = self.world
        if world.distributed:
            state["num_learners"] = world.size
            state["shared_rng"] = {k: g.get_state() for k, g in world.generators.items()}
        return state

    def load_state_dict(self, state: Dict[str, Any], regroup: bool = False) -> None:
        """Restores ``state_dict()`` output, including the global summary counter.

        Args:
            regroup: the checkpoint may be of another number of learners.

        Raises:
            ValueError: for a checkpoint of another number of learners, unless ``regroup``.
        """
        world = self.world
        learners = int(state.get("num_learners", 1))
        if learners != world.size and not regroup:
            raise ValueError(f"it was written by {learners} learner(s), this run has "
                             f"{world.size} (TrainerConfig.num_learners)")
        if self.counters is not None and self.counters.train_iter_num == 0:
            # (a checkpoint whose algorithm part has no iteration count: the trainer's)
            self.counters.train_iter_num = int(state["iter_num"])
        summary.set_global_counter(int(state["global_counter"]))
        self.tracker_run_id = state.get("tracker_run_id")
        self.restored_not_checkpointed = list(state.get("not_checkpointed", []))
        for kind, rng in state.get("shared_rng", {}).items():
            if kind in world.generators:
                world.generators[kind].set_state(rng)
