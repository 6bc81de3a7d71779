"""Run by each of two torchrun learners: the two-learner run of ``argv[1]`` through a ``World``
handed to its ``Trainer`` (the process's own world is never set), then, in the same process, a
one-learner run of ``argv[2 + rank]`` through a ``Trainer`` of its own world."""

import datetime
import os
import sys

import gin
import torch.distributed as dist

from rlf.trainers import learners
from rlf.trainers.job import Job, configure, train_here
from rlf.utils import distributed
from tests.trainers.test_learners import IMPALA


def _train(root: str, learners: int, world) -> None:
    bindings = [b for flag, b in zip(IMPALA[2:], IMPALA[3:]) if flag == "--conf_param"]
    bindings += ["TrainerConfig.num_iterations=4", f"TrainerConfig.num_learners={learners}"]
    config, root, _ = configure(Job(IMPALA[1], bindings, root, progress=False))
    train_here(config, root, progress=False, world=world)


def main() -> None:
    rank, size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=120))
    world = distributed.World(rank=rank, size=size)
    _train(sys.argv[1], size, world)
    assert not distributed.world().distributed  # the process's world was never set
    dist.destroy_process_group()
    gin.clear_config()  # (a run locks gin's configuration; rlf.train clears it too)
    _train(sys.argv[2 + rank], 1, None)
    # As rlf.bin.train's learners end: Python's finalization can meet gloo's threads in an
    # order that aborts the process (SIGABRT) after its work is done.
    learners.end_learner(0)


if __name__ == "__main__":
    main()
