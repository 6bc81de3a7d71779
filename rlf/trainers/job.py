"""A training job as the command line (``rlf.bin.train``) and the Python API (``rlf.train``)
start it: a conf file and bindings, a run directory; trained in this process, or by
``num_learners`` learner processes this one launches.

The job raises what went wrong (``UserError`` for the input, ``ActorFailure``,
``CheckpointWriteError``, ``NonFiniteLossError``, ``SummaryWriteError``,
``LearnerFailure``); the command line turns them into one line and an exit status.
"""

from __future__ import annotations

import contextlib
import dataclasses
import shutil
import sys
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

from rlf.runtime import configure_process
from rlf.trainers.gin_config import (ConfigError, configured_values_refused_as_config_errors,
                                     conf_values, parse_config, schedules_note)
from rlf.utils.errors import one_line

__all__ = ["RUN_LENGTH", "Job", "configure", "train_here", "launch_learners"]

#: The bindings that bound a run.
RUN_LENGTH = ("TrainerConfig.num_env_steps", "TrainerConfig.num_iterations")


@dataclasses.dataclass
class Job:
    """What a training job is made of.

    Attributes:
        conf: the conf file (a path).
        bindings: gin bindings after the conf's (``--conf_param``, the short flags').
        root_dir: the run directory, or None for ``runs/<conf stem>`` (or
            ``TrainerConfig.root_dir``).
        progress: show a progress bar.
        debug: learners launched by this job show tracebacks (``--debug``).
    """

    conf: str
    bindings: List[str]
    root_dir: Optional[str] = None
    progress: bool = True
    debug: bool = False


def configure(job: Job):
    """Parses the job's configuration: ``(config, root_dir, note)``, ``note`` the line naming
    the schedules a changed run length leaves as they are (or None).

    Raises:
        ConfigError: (a ``UserError``) for a missing conf, an empty ``root_dir``, a bad
            binding or a value ``TrainerConfig`` refuses.
    """
    if not job.conf:
        raise ConfigError("--conf is required (e.g. --conf confs/impala_atari.gin)")
    if job.root_dir is not None and not str(job.root_dir).strip():
        # '' (an unset shell variable in quotes) would train in the default directory
        raise ConfigError("--root_dir is empty: give a directory, or leave the flag out for "
                          "runs/<conf stem>")
    conf_length = None
    if any(b.split("=", 1)[0].strip() in RUN_LENGTH for b in job.bindings):
        conf_length = conf_values(job.conf, RUN_LENGTH, 0)
    parse_config(job.conf, job.bindings)
    note = schedules_note(RUN_LENGTH, conf_length) if conf_length is not None else None
    from rlf.algorithms import TrainerConfig
    try:
        config = TrainerConfig()
    except (ValueError, TypeError) as e:
        raise ConfigError(one_line(e)) from e
    root_dir = (job.root_dir or config.run.root_dir
                or str(Path("runs") / Path(job.conf).stem))
    return config, str(root_dir), note


def train_here(config, root_dir: str, progress: bool,
               note: Optional[str] = None, on_note: Callable[[str], Any] = print,
               world=None) -> Dict[str, Any]:
    """Trains in this process (one learner, or one of several): builds the ``Trainer``,
    applies the learner's process settings and runs it.

    Args:
        world: the learners this process joined (``learners.join_learners``), or None for
            the one learner of an ordinary run.

    Returns:
        ``Trainer.train``'s result.

    Raises:
        What ``Trainer.build`` and ``Trainer.train`` raise.
    """
    from rlf.trainers import Trainer
    trainer = Trainer(config, root_dir=root_dir, progress=progress, world=world)
    # The learner's process settings; the actors apply theirs themselves (ActorSetup).
    configure_process(num_threads=config.run.torch_num_threads,
                      flush_denormal=config.run.flush_denormal,
                      reuse_freed_memory=config.run.reuse_freed_memory,
                      deterministic=config.actors.deterministic)
    with configured_values_refused_as_config_errors():
        trainer.build()
    if note:  # after every check, on stdout: a mistake stays one line on stderr
        on_note(note)
    return trainer.train()


def launch_learners(config, job: Job, root_dir: str) -> int:
    """Starts ``config.run.num_learners`` learners running ``rlf.bin.train`` with the job's
    conf and bindings (``learners.launch``) and waits for them.

    Returns:
        0 when they finished, or were stopped by a signal after a checkpoint;
        ``learners.STOPPED_BY_SIGNAL`` (130) for a stop before one (a new run directory is
        removed then).

    Raises:
        LearnerFailure: as ``learners.launch`` (a new run directory that a mistake in the
            input stopped before it began is removed first).
        RunDirectoryError: for a ``root_dir`` that cannot be made.
    """
    from rlf.trainers import learners
    from rlf.trainers.run_dir import check_run_directory
    check_run_directory(Path(root_dir))
    if not config.actors.async_unroll:
        learners.environments_per_learner(config.run.num_learners)
    new = not Path(root_dir).exists()
    before = _checkpoints(root_dir)
    argv = ([f"--conf={job.conf}"] + [f"--conf_param={b}" for b in job.bindings]
            + [f"--root_dir={root_dir}", "--progress" if job.progress else "--noprogress"]
            + (["--debug"] if job.debug else []))
    try:
        try:
            status = learners.launch(argv, config.run.num_learners, root_dir)
        except KeyboardInterrupt:  # before the launcher started the learners
            print("aborted: stopped while starting; nothing was written", file=sys.stderr)
            status = learners.STOPPED_BY_SIGNAL
    except learners.LearnerFailure as e:
        if new and e.caused_by_input:
            # A mistake in the input stopped every learner before the run began.
            _remove_unbegun_run(Path(root_dir))
        raise
    if status != learners.STOPPED_BY_SIGNAL:
        return status
    if _checkpoints(root_dir) != before:
        return 0  # stopped with its checkpoint, as one learner stops
    # stopped before a checkpoint (learner 0 said so): a new run leaves nothing
    if new:
        _remove_unbegun_run(Path(root_dir))
    return learners.STOPPED_BY_SIGNAL


def _remove_unbegun_run(root_dir: Path) -> None:
    """Removes a new run directory that holds nothing but the learners' logs (the learners
    stopped before the run began); anything else there keeps it, logs included."""
    from rlf.trainers.learners import LEARNER_LOG_DIR
    if root_dir.is_dir() and all(p.name == LEARNER_LOG_DIR for p in root_dir.iterdir()):
        shutil.rmtree(root_dir / LEARNER_LOG_DIR, ignore_errors=True)
        with contextlib.suppress(OSError):
            root_dir.rmdir()


def _checkpoints(root_dir: str) -> dict:
    """The run's checkpoint files and their times (a stop that wrote one changes them)."""
    return {p.name: p.stat().st_mtime_ns for p in (Path(root_dir) / "ckpt").glob("ckpt-*")}
