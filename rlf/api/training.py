"""``rlf.train``: a run of a conf from Python, as ``python -m rlf.bin.train`` runs it."""

from __future__ import annotations

import contextlib
import dataclasses
import tempfile
from pathlib import Path
from typing import Any, Dict, Iterator, Optional, Sequence, Union

import gin

from rlf.api.environments import check_portable, env_name_of
from rlf.trainers.job import Job, configure, launch_learners, train_here
from rlf.trainers.run_flags import short_flag_bindings
from rlf.utils.errors import UserError, one_line_user_errors
from rlf.utils.paths import expand_path

__all__ = ["Run", "train"]


@dataclasses.dataclass(frozen=True)
class Run:
    """A finished (or stopped) run of ``rlf.train``.

    Attributes:
        root_dir: the run directory (``config.gin``, ``train/``, ``ckpt/``).
        iterations: training iterations done, over every session of the run.
        env_steps: agent steps (``EnvironmentSteps``), over every session of the run.
        metrics: the final training metrics (``AverageReturn``, ``NumberOfEpisodes``, ...;
            Atari adds ``AverageEpisodeScore``); those of learner 0 where several learners
            trained, read from its TensorBoard events.
        evaluation: the last evaluation's metrics (``TrainerConfig.evaluate``:
            ``AverageReturn``, ``returns``, ``lengths``, ...), or None.
        stopped_by_signal: whether Ctrl-C or SIGTERM ended it (after a checkpoint).
    """

    root_dir: Path
    iterations: int
    env_steps: int
    metrics: Dict[str, float]
    evaluation: Optional[Dict[str, Any]] = None
    stopped_by_signal: bool = False

    def policy(self, checkpoint: Union[str, int] = "latest"):
        """``rlf.load_policy(self.root_dir, checkpoint)``: the trained policy."""
        from rlf.api.policy import load_policy
        return load_policy(self.root_dir, checkpoint)


@contextlib.contextmanager
def _conf_file(conf: Union[str, Path]) -> Iterator[str]:
    """A conf file's path (``~`` and variables expanded), or a conf's text written to a
    temporary file for the run (learner processes read it too)."""
    text = str(conf)
    if isinstance(conf, str) and ("\n" in text or "=" in text):
        with tempfile.TemporaryDirectory(prefix="rlf-conf-") as folder:
            path = Path(folder) / "conf.gin"
            path.write_text(text)
            yield str(path)
        return
    yield expand_path(text, "conf")


def train(conf: Union[str, Path], *, root_dir: Optional[Union[str, Path]] = None,
          env: Any = None, seed: Optional[int] = None, steps: Optional[int] = None,
          bindings: Sequence[str] = (), progress: bool = True) -> Run:
    """Trains ``conf`` as ``python -m rlf.bin.train`` does, in this process (and its actors),
    or with ``TrainerConfig.num_learners`` learner processes; the same ``root_dir`` resumes.

    gin's configuration is this call's while it runs: it is cleared before the conf is read
    and after the run.

    Args:
        conf: a gin file (``"confs/ppo_cartpole.gin"``; ``~`` and ``$VARS`` expanded) or a
            conf's text (any string with a newline or ``=``).
        root_dir: the run directory; None: ``runs/<conf stem>`` (a conf's text:
            ``runs/conf``), or ``TrainerConfig.root_dir``.
        env: the environment, instead of the conf's ``load.env_name``: a gymnasium id
            (also ``"module:Env-v0"``), a ``gymnasium.Env`` subclass, or a function that
            returns a ``gymnasium.Env``; made once per environment the conf asks for
            (``load.num_envs``). A class or function defined in ``__main__`` or inside a
            function is refused where other processes make environments (actors, Ray,
            several learners); define it in a module then.
        seed: ``TrainerConfig.random_seed``.
        steps: the run's agent steps (``TrainerConfig.num_env_steps``, with
            ``num_iterations = 0``).
        bindings: gin bindings after the conf's, as ``--conf_param`` takes them
            (``"TrainerConfig.unroll_length = 16"``).
        progress: show a progress bar.

    Returns:
        The ``Run``.

    Raises:
        UserError: for a mistake in the input (the conf, a binding, the environment, a
            ``root_dir`` or checkpoint that does not fit), before anything is written.
        rlf.trainers.ActorFailure: (also ``CheckpointWriteError``, ``NonFiniteLossError``,
            ``rlf.utils.summary.SummaryWriteError``) when training stops on a failure, after
            writing what it could (the command line's exit status 1).
        rlf.trainers.learners.LearnerFailure: when a learner of several failed.
    """
    with one_line_user_errors():
        return _train(conf, root_dir, env, seed, steps, bindings, progress)


def _train(conf, root_dir, env, seed, steps, bindings, progress) -> Run:
    if isinstance(bindings, str):
        raise UserError(f"bindings={bindings!r}: give a list of bindings, e.g. "
                        f"[{bindings!r}]")
    bindings = list(bindings)
    portable, env_name = True, None
    if env is not None:
        env_name, portable = env_name_of(env)
    bindings += short_flag_bindings(bindings, seed=seed, env=env_name, steps=steps, api=True)
    root = None if root_dir is None else expand_path(root_dir, "root_dir")
    gin.clear_config()
    try:
        with _conf_file(conf) as conf_file:
            job = Job(conf_file, bindings, root, progress)
            config, run_dir, note = configure(job)
            if env is not None:
                check_portable(env, portable, config)
            if config.run.num_learners > 1:
                return _launched(config, job, run_dir)
            result = train_here(config, run_dir, progress, note)
    finally:
        gin.clear_config()
    return Run(root_dir=Path(run_dir), iterations=int(result["iterations"]),
               env_steps=int(result["env_steps"]), metrics=dict(result["metrics"]),
               evaluation=result["eval"] or None,
               stopped_by_signal=bool(result["stopped_by_signal"]))


def _launched(config, job: Job, run_dir: str) -> Run:
    """Trains with several learner processes; the ``Run`` from learner 0's files."""
    from rlf.trainers import learners
    from rlf.trainers.run_dir import run_checkpointer
    from rlf.utils.tensorboard_reader import read_scalar_tags
    status = launch_learners(config, job, run_dir)
    if status == learners.STOPPED_BY_SIGNAL:
        raise KeyboardInterrupt
    root = Path(run_dir)
    found = run_checkpointer(root).newest_complete()
    trainer = found[1].get("trainer", {}) if found is not None else {}
    metrics = {tag.split("/", 1)[1]: float(values[-1])
               for tag, (_, values, _) in read_scalar_tags(root / "train").items()
               if tag.startswith("Metrics/") and values}
    return Run(root_dir=root, iterations=int(trainer.get("iter_num", 0)),
               env_steps=int(trainer.get("env_steps", 0)), metrics=metrics)
