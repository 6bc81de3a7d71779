"""``RlfTrainable``: a Ray Tune trial that is an ordinary rlf run.

A trial parses the experiment's conf with its ``--conf_param`` bindings and then the trial's
own values (``rlf.experiments.space.trial_bindings``), builds a ``Trainer`` in its own run
directory and drives it in steps of a fixed number of iterations or environment steps. Its
checkpoints are rlf's exact checkpoints (parameters, optimizers, counters, RNG states,
environment states where they can be captured, the replay buffer with
``save_replay_buffer``), copied into Tune's checkpoint directories
(``rlf.experiments.clone``).

Restoring a checkpoint always builds the run again from the trial's own values, restores the
checkpoint and then puts the configured optimizer settings back
(``Trainer(configured_optimizer_settings=True)``): a PBT trial that clones another keeps its
mutated learning rate and every other mutated gin binding (an algorithm's constructor
arguments are the new values, its state the cloned one).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from ray import tune

from rlf.trainers.gin_config import configured_values_refused_as_config_errors, parse_config
from rlf.experiments.clone import (amend_last_event, continues_from, export_checkpoint,
                                   install_checkpoint, read_checkpoint_info, record_checkpoint,
                                   restored_state)
from rlf.experiments.space import (ENV_KEY, SEED_KEY, python_value, short_name,
                                   trial_bindings)
from rlf.trainers.run_dir import RunDirectoryError
from rlf.utils import summary

__all__ = ["ExperimentSpec", "RlfTrainable", "RESULT_METRICS", "BUDGET_REACHED"]

#: Seconds a trial waits for its run directory, which its previous actor may still hold.
LOCK_WAIT_SECONDS = 60.0
#: The key of a trial's report that says its run reached its budget (a trial a scheduler stops
#: early reports ``done`` without it).
BUDGET_REACHED = "budget_reached"
#: The metrics a trial reports each step (besides ``iterations`` and ``env_steps``), read
#: from the run's own episode metrics and its last evaluation: what ASHA and PBT may rank by.
RESULT_METRICS = ("AverageReturn", "AverageEpisodeScore", "AverageEpisodeLength",
                  "NumberOfEpisodes", "Eval/AverageReturn", "Eval/AverageEpisodeScore")


@dataclass(frozen=True)
class ExperimentSpec:
    """What every trial of an experiment shares.

    Attributes:
        conf: the gin file (an absolute path).
        conf_params: bindings after the conf, before the trial's values.
        root_dir: the experiment's directory (absolute).
        keys: the bindings the trials vary (``SearchSpace.keys``).
        step_iterations: iterations per trial step (0: use ``step_env_steps``).
        step_env_steps: environment steps per trial step (0: use ``step_iterations``).
        layout: ``"trials"`` (a run in ``root_dir/<trial dir name>``) or ``"suite"``
            (``root_dir/<game>/seed<seed>``, ``rlf.bin.suite``'s).
    """

    conf: str
    conf_params: Tuple[str, ...] = ()
    root_dir: str = ""
    keys: Tuple[str, ...] = ()
    step_iterations: int = 10
    step_env_steps: int = 0
    layout: str = "trials"

    def run_dir(self, config: Dict[str, Any], trial_dir_name: str) -> Path:
        """The rlf run directory of the trial with ``config``."""
        root = Path(self.root_dir)
        if self.layout == "suite":
            game = config[ENV_KEY].split("/")[-1].split("-v")[0]
            return root / game / f"seed{config[SEED_KEY]}"
        return root / trial_dir_name

    def trial_dir_name(self, config: Dict[str, Any], trial_id: str) -> str:
        """Tune's directory name of a trial: its index and values (``00003_lr=0.001_seed0``)."""
        index = trial_id.rsplit("_", 1)[-1]
        name = short_name(config, self.keys)
        return f"{index}_{name}" if name else index


class RlfTrainable(tune.Trainable):
    """A Tune trial running one rlf run (module docstring); ``setup(config, experiment)``
    takes the ``ExperimentSpec`` through ``tune.with_parameters``."""

    def setup(self, config: Dict[str, Any],  # type: ignore[override]
              experiment: Optional[ExperimentSpec] = None):
        assert experiment is not None  # given by tune.with_parameters
        self._experiment = experiment
        self._values = dict(config)
        self._trainer: Any = None  # the run's Trainer, once started
        self._finished: Optional[Dict[str, Any]] = None  # the results of a finished run
        self._last: Dict[str, Any] = {}
        self._steps_before: Optional[int] = None  # of the run a reset ended

    # ------------------------------------------------------------------ the run
    @property
    def run_dir(self) -> Path:
        """The trial's rlf run directory."""
        storage: Any = self._storage  # Tune's, set before setup
        return self._experiment.run_dir(self._values, storage.trial_dir_name)

    @property
    def bindings(self) -> List[str]:
        """The trial's bindings after the experiment's: its varied values."""
        return trial_bindings(self._values, self._experiment.keys)

    def _start(self, announce: Optional[Dict[str, Any]] = None) -> None:
        """Builds the run from the conf and the trial's values, resumes its newest checkpoint
        and puts the configured optimizer settings back (PBT's explore)."""
        import gin

        from rlf.algorithms import TrainerConfig
        from rlf.runtime import configure_process
        from rlf.trainers import Trainer
        experiment = self._experiment
        gin.clear_config()
        parse_config(experiment.conf, list(experiment.conf_params) + self.bindings)
        config = TrainerConfig()
        configure_process(num_threads=config.run.torch_num_threads,
                          flush_denormal=config.run.flush_denormal,
                          reuse_freed_memory=config.run.reuse_freed_memory,
                          deterministic=config.actors.deterministic)
        deadline = time.monotonic() + LOCK_WAIT_SECONDS
        while True:
            trainer = Trainer(config, root_dir=str(self.run_dir), progress=False,
                              handle_signals=False, configured_optimizer_settings=True)
            try:
                with configured_values_refused_as_config_errors():
                    trainer.build()
                break
            except RunDirectoryError:
                # The trial's previous actor (paused, or stopped for an exploit) releases
                # the run when it has written its checkpoint and ended.
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
        trainer.start()
        changed = trainer.optimizer_changes
        self._trainer = trainer
        if announce is not None:
            announce["restored"] = restored_state(trainer)
            announce["changed"] = changed
            amend_last_event(self.run_dir, announce)
            self._summarize_event(announce, changed)

    def _summarize_event(self, event: Dict[str, Any], changed: List[str]) -> None:
        """The lineage event in TensorBoard: a text summary and the trial's values as
        ``Experiment/<binding>`` scalars at the current environment step."""
        steps = self._trainer.algorithm.get_env_steps()
        lines = [f"{event['kind']} of {event['source_trial']} at iteration "
                 f"{event['source_iteration']} ({event['source_env_steps']} environment "
                 f"steps) with {', '.join(event['bindings']) or 'the same values'}"]
        lines += changed
        with summary.record_if(lambda: True):
            summary.text("Experiment/lineage", "  \n".join(lines), step=steps)
            self._summarize_values(steps)

    def _summarize_values(self, steps: int) -> None:
        for key in self._experiment.keys:
            value = python_value(self._values.get(key))
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                summary.scalar(f"Experiment/{key}", float(value), step=steps)

    def _result(self, results: Dict[str, Any]) -> Dict[str, Any]:
        """The step's report: ``iterations``, ``env_steps`` and ``RESULT_METRICS`` (the
        episode metrics, NaN before an episode has ended; the last evaluation's, NaN before
        the first)."""
        metrics, evaluation = results["metrics"], results["eval"] or {}
        out = {"iterations": results["iterations"], "env_steps": results["env_steps"]}
        ended = bool(metrics.get("NumberOfEpisodes"))
        for name in RESULT_METRICS:
            if name.startswith("Eval/"):
                key = name.split("/", 1)[1]
                out[name] = evaluation.get(key, self._last.get(name, math.nan))
            elif name in metrics:
                out[name] = metrics[name] if ended or name == "NumberOfEpisodes" else math.nan
        self._last = out
        return out

    # ------------------------------------------------------------------ Tune's API
    def step(self) -> Dict[str, Any]:
        """Trains ``step_iterations`` iterations (or ``step_env_steps`` environment steps);
        a run that reaches its budget is finished (its last checkpoint written) and reports
        ``done``."""
        if self._finished is not None:
            return {**self._result(self._finished), "done": True, BUDGET_REACHED: True}
        started = self._trainer is not None
        if not started:
            self._start()
        trainer, experiment = self._trainer, self._experiment
        if not started:
            with summary.record_if(lambda: True):
                self._summarize_values(trainer.algorithm.get_env_steps())
        if experiment.step_env_steps:
            target = trainer.algorithm.get_env_steps() + experiment.step_env_steps
            results = trainer.run(max_iterations=1)
            while not trainer.done and trainer.algorithm.get_env_steps() < target:
                results = trainer.run(max_iterations=1)
        else:
            results = trainer.run(max_iterations=experiment.step_iterations)
        if trainer.done:
            self._finished = trainer.finish()
            self._finished_checkpoint = (trainer.checkpointer, trainer.iterations)
            self._trainer = None
            return {**self._result(self._finished), "done": True, BUDGET_REACHED: True}
        return self._result(results)

    def save_checkpoint(self, checkpoint_dir: str) -> str:  # type: ignore[override]
        """Writes the run's checkpoint of the current iteration into ``checkpoint_dir`` (a
        finished run's last one)."""
        if self._finished is not None:
            checkpointer, step = self._finished_checkpoint
            env_steps = self._finished["env_steps"]
        else:
            if self._trainer is None:
                self._start()  # not started yet: its newest checkpoint, or iteration 0
            self._trainer.save()
            checkpointer, step = self._trainer.checkpointer, self._trainer.iterations
            env_steps = self._trainer.algorithm.get_env_steps()
        info = export_checkpoint(checkpointer, step, env_steps, Path(checkpoint_dir),
                                 self.trial_name, self.bindings)
        record_checkpoint(self.run_dir, info["id"])
        return checkpoint_dir

    def load_checkpoint(self, checkpoint_dir: str) -> None:  # type: ignore[override]
        """Restores a checkpoint of this trial or, PBT's exploit, of another: the run
        continues from its own newest checkpoint where that grew from this one, else the
        checkpoint is installed as the run's newest; then the run is built with this trial's
        values and resumed (module docstring)."""
        info = read_checkpoint_info(Path(checkpoint_dir))
        steps, self._steps_before = self._steps_before, None
        if self._trainer is not None:
            steps = self._trainer.algorithm.get_env_steps()
            self._trainer.abort()
            self._trainer = None
        self._finished = None
        event = None
        if not continues_from(self.run_dir, info):
            event = install_checkpoint(Path(checkpoint_dir), info, self.run_dir,
                                       self.trial_name, self.bindings, steps)
        self._start(announce=event)

    def reset_config(self, new_config: Dict[str, Any]) -> bool:
        """Takes new values (PBT's explore, or a reused actor's next trial): the run is
        ended without a checkpoint and built again with them at the next call."""
        if self._trainer is not None:
            self._steps_before = self._trainer.algorithm.get_env_steps()
            self._trainer.abort()
            self._trainer = None
        self._finished = None
        self._values = dict(new_config)
        return True

    def cleanup(self) -> None:
        """Ends the run as a stopped training run ends: with a checkpoint."""
        if self._trainer is not None:
            trainer, self._trainer = self._trainer, None
            trainer.finish()
