"""Data-parallel learners on ``torch.distributed``: the process group of a worker, and the
launcher that starts ``TrainerConfig.num_learners`` of them on this machine.

A run with ``num_learners = N`` is ``N`` processes of ``rlf.bin.train``, one device each (gloo
on CPU, NCCL on CUDA). They are started either by ``rlf.bin.train`` itself (``launch``:
torch's elastic launcher, as ``torchrun --standalone`` does) or by ``torchrun`` directly
(``--nproc_per_node N``, and ``--nnodes``/``--rdzv_endpoint`` over several machines). Either
way each process finds its rank in the environment torch's launcher sets (``RANK``,
``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_ADDR``/``MASTER_PORT``) and ``join_learners`` joins
the group.
"""

from __future__ import annotations

import datetime
import logging
import os
import sys
import uuid
from pathlib import Path
from typing import NoReturn, Optional, Sequence

import torch

from rlf.utils import distributed
from rlf.trainers.run_dir import make_directory
from rlf.utils.errors import UserError

__all__ = ["environments_per_learner", "launched_as_learner", "join_learners",
           "leave_learners", "launch", "LearnerFailure", "LEARNER_LOG_DIR",
           "COLLECTIVE_TIMEOUT_SECONDS", "STOP_GRACE_SECONDS", "STOPPED_BY_SIGNAL"]

#: Where each learner's stdout and stderr go, under the run directory.
LEARNER_LOG_DIR = "learners"
#: How long a collective waits for a learner that neither answers nor dies (gloo's and NCCL's
#: timeout): a learner that died is noticed at once, one that hangs after this. It bounds what
#: one learner may do alone between two exchanges too: learner 0's evaluation.
COLLECTIVE_TIMEOUT_SECONDS = 1800
#: How long the launcher waits, after passing a stop signal on, for the learners to finish their
#: iteration and write their checkpoint before it kills them.
STOP_GRACE_SECONDS = 300
#: ``launch``'s status when a stop signal ended the learners (a shell's, for SIGINT).
STOPPED_BY_SIGNAL = 130


class LearnerFailure(RuntimeError):
    """A learner process failed; the run stopped. The message names the learner, how it
    ended, the last line it wrote to stderr and its log.

    Args:
        message: the line.
        caused_by_input: the learner exited with status 2 (a mistake in the input).
    """

    def __init__(self, message: str, caused_by_input: bool = False):
        super().__init__(message)
        self.caused_by_input = bool(caused_by_input)


def environments_per_learner(num_learners: int) -> int:
    """``load.num_envs / num_learners``: each synchronous learner's share of the environments.

    Raises:
        UserError: if ``load.num_envs`` is unbound or not a multiple of ``num_learners``.
    """
    import gin
    try:
        total = int(gin.query_parameter("load.num_envs"))
    except ValueError:
        raise UserError("TrainerConfig.num_learners > 1 splits load.num_envs among the "
                        "learners: bind load.num_envs in the gin file") from None
    if total % num_learners:
        raise UserError(f"load.num_envs = {total} cannot be split evenly among "
                        f"TrainerConfig.num_learners = {num_learners} learners; use a "
                        f"multiple of {num_learners}")
    return total // num_learners


def launched_as_learner() -> bool:
    """Whether this process was started by torch's launcher (``torchrun``, or ``launch``) as one
    learner of a data-parallel run."""
    return "TORCHELASTIC_RUN_ID" in os.environ or (
        "RANK" in os.environ and "WORLD_SIZE" in os.environ and "MASTER_ADDR" in os.environ)


def join_learners(num_learners: int, device: str) -> distributed.World:
    """Joins the process group of the learners (``torch.distributed.init_process_group`` from
    the launcher's environment) and makes it this process's ``rlf.utils.distributed.World``.

    Args:
        num_learners: ``TrainerConfig.num_learners``, which must equal the launcher's
            ``WORLD_SIZE``.
        device: ``TrainerConfig.device``: ``"cpu"`` (gloo) or ``"cuda"`` (NCCL; learner
            ``LOCAL_RANK`` takes CUDA device ``LOCAL_RANK``).

    Returns:
        The ``World``.

    Raises:
        UserError: if ``WORLD_SIZE`` differs from ``num_learners``, or ``device`` names one
            CUDA device (``cuda:1``) for several learners.
    """
    size, rank = int(os.environ["WORLD_SIZE"]), int(os.environ["RANK"])
    local_rank = int(os.environ.get("LOCAL_RANK", rank))
    if size != num_learners:
        raise UserError(f"the launcher started {size} learner processes (WORLD_SIZE), but "
                        f"TrainerConfig.num_learners = {num_learners}; make them equal")
    kind = torch.device(device)
    if kind.type == "cuda" and kind.index is not None and size > 1:
        raise UserError(f"TrainerConfig.device = {device!r} names one CUDA device for "
                        f"{size} learners; use device = 'cuda' (learner i takes cuda:i)")
    import torch.distributed as dist
    comm_device = "cpu"
    if kind.type == "cuda":
        torch.cuda.set_device(local_rank)
        comm_device = f"cuda:{local_rank}"
    if not dist.is_initialized():
        dist.init_process_group("nccl" if kind.type == "cuda" else "gloo",
                                timeout=datetime.timedelta(seconds=COLLECTIVE_TIMEOUT_SECONDS))
    world = distributed.World(rank=rank, size=size, local_rank=local_rank,
                              comm_device=comm_device)
    distributed.set_world(world)
    return world


def leave_learners() -> None:
    """Leaves the process group (``destroy_process_group``) and makes this process one learner
    again; nothing if it joined none."""
    import torch.distributed as dist
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()
    distributed.set_world(distributed.World())


def end_learner(status: int) -> NoReturn:
    """Ends a learner process whose run is over (``leave_learners`` done) with ``status``, as
    Python's exit would: it waits for the threads that are not daemons, runs the ``atexit``
    handlers (trackers, Ray, logging) and flushes the standard streams; then the process exits
    without Python's finalization. There, gloo's threads met C++ destructors in an order
    nothing controls: a learner that had written its last checkpoint could be killed by
    SIGABRT ("terminate called without an active exception"), and its launcher reported a
    failed run.
    """
    import atexit
    import threading
    for thread in threading.enumerate():
        if thread is not threading.main_thread() and not thread.daemon:
            thread.join()
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


def _learner_log(log_dir: Path, rank: int, stream: str) -> Optional[Path]:
    """The file torch's launcher wrote learner ``rank``'s ``stream`` (stdout, stderr) to."""
    found = sorted(log_dir.glob(f"*/attempt_*/{rank}/{stream}.log"),
                   key=lambda p: p.stat().st_mtime)
    return found[-1] if found else None


def _last_line(path: Optional[Path]) -> str:
    if path is None or not path.is_file():
        return ""
    lines = [s.strip() for s in path.read_text(errors="replace").splitlines() if s.strip()]
    # (the launcher's own lines and tqdm's bar are not the learner's last word)
    lines = [s for s in lines if not s.startswith(("[", "WARNING:torch", "W1", "I1", "E1"))
             and "it/s" not in s]
    return lines[-1] if lines else ""


def launch(argv: Sequence[str], num_learners: int, root_dir: str) -> int:
    """Starts ``num_learners`` processes of ``python -m rlf.bin.train argv`` on this machine
    (torch's elastic launcher with a c10d rendezvous on localhost, as ``torchrun
    --standalone``) and waits for them. Learner 0 writes to this process's stdout and stderr;
    learner ``r > 0``'s go to ``root_dir/learners/<run id>/attempt_0/<r>/``.

    When a learner fails, the others are stopped at once (the launcher's monitor, and each
    collective fails when a peer's connection closes).

    Returns:
        0 when every learner finished; ``STOPPED_BY_SIGNAL`` (130) when a SIGINT or SIGTERM
        stopped them (each wrote the run's last checkpoint, or had not yet begun).

    Raises:
        LearnerFailure: naming the first learner that failed, its exit status or signal, the
            last line of its stderr and its log.
    """
    from torch.distributed.elastic.multiprocessing import DefaultLogsSpecs, SignalException, Std
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.launcher.api import LaunchConfig, elastic_launch
    # (the launcher's modules set their loggers' own levels: each is raised)
    for name in list(logging.root.manager.loggerDict):
        if name.startswith(("torch.distributed.elastic", "torch.distributed.launcher")):
            logging.getLogger(name).setLevel(logging.CRITICAL)
    log_dir = Path(root_dir) / LEARNER_LOG_DIR
    make_directory(Path(root_dir))  # (one line where it cannot be made)
    log_dir.mkdir(exist_ok=True)
    config = LaunchConfig(
        min_nodes=1, max_nodes=1, nproc_per_node=num_learners, run_id=uuid.uuid4().hex[:12],
        rdzv_backend="c10d", rdzv_endpoint="localhost:0", max_restarts=0,
        monitor_interval=0.5, start_method="spawn",
        # a stop signal reaches every learner, which finishes its iteration and joins in
        # one last checkpoint: give them the time (they are killed after it)
        shutdown_timeout=STOP_GRACE_SECONDS,
        # learner 0 writes to this console (its progress bar), the others to their logs
        logs_specs=DefaultLogsSpecs(log_dir=str(log_dir), redirects={
            r: Std.NONE if r == 0 else Std.ALL for r in range(num_learners)}))
    # The learners set their own thread counts (TrainerConfig.torch_num_threads).
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    try:
        elastic_launch(config, entrypoint=sys.executable)("-m", "rlf.bin.train", *argv)
    except SignalException:
        # SIGINT/SIGTERM: the launcher passed it on and waited; learner 0 said whether the
        # checkpoint was written
        return STOPPED_BY_SIGNAL
    except ChildFailedError as e:
        if any(f.local_rank == 0 and f.exitcode == 2 for f in e.failures.values()):
            # learner 0 said what was wrong with the input, in one line, on this console
            raise LearnerFailure("", caused_by_input=True) from None
        rank, failure = e.get_first_failure()
        how = (f"was killed by {failure.signal_name()}" if failure.exitcode < 0
               else f"exited with status {failure.exitcode}")
        if failure.local_rank == 0:
            where, last = "its output is above", ""
        else:
            log = _learner_log(log_dir, failure.local_rank, "stderr")
            where, last = f"its log: {log or log_dir}", _last_line(log)
        raise LearnerFailure(
            f"learner {rank} {how}{f': {last}' if last else ''} ({where}); the other "
            f"learners were stopped", caused_by_input=failure.exitcode == 2) from None
    return 0
