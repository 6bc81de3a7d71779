"""Experiment trackers beside TensorBoard: MLflow and Weights & Biases.

``TrainerConfig.tracker = 'mlflow'`` (or ``'wandb'``) makes the ``Trainer`` open a tracked run
when it starts: every scalar it writes to TensorBoard is mirrored there with the same tag and
step (``rlf.utils.summary.add_mirror``), and the operative gin config is recorded as the run's
parameters. The tracked run's id is kept in the checkpoint, so a resumed run continues the same
tracked run instead of starting another.

Where the runs go is the tracker's own business: MLflow's tracking URI
(``MLFLOW_TRACKING_URI``; by default MLflow's local store in the working directory) and
experiment (``MLFLOW_EXPERIMENT_NAME``, else ``rlf``); W&B's project (``WANDB_PROJECT``, else
``rlf``), entity and mode (``WANDB_MODE=offline`` writes the run under the run directory's
``wandb/`` without a network).
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

from rlf.utils.extras import require

__all__ = ["Tracker", "MlflowTracker", "WandbTracker", "make_tracker", "check_tracker"]

#: Scalars buffered before one batch goes to MLflow (its limit per batch is 1,000).
MLFLOW_BATCH = 500


class Tracker:
    """A tracked run: ``log_scalar`` for each scalar, ``flush``, then ``close``.

    Attributes:
        run_id: the tracker's id of the run (checkpointed by the ``Trainer``).
    """

    run_id: str

    def log_params(self, params: Dict[str, str]) -> None:
        """Records ``params`` (name -> value as text) as the run's parameters."""
        raise NotImplementedError

    def log_scalar(self, tag: str, value: float, step: int) -> None:
        """Mirrors one scalar (the TensorBoard tag, its value and step)."""
        raise NotImplementedError

    def flush(self) -> None:
        """Sends what is buffered."""

    def close(self, failed: bool = False) -> None:
        """Ends the run (``failed``: the run stopped on an error)."""
        raise NotImplementedError


class MlflowTracker(Tracker):
    """An MLflow run, created in the experiment ``MLFLOW_EXPERIMENT_NAME`` (else ``rlf``)
    under the tracking URI MLflow picks, or reopened by its id.

    Args:
        name: the run's name (the run directory's name).
        run_id: the id of the run to continue; None starts a new run.

    Raises:
        MissingExtraError: without mlflow (``pip install -e '.[mlflow]'``).
    """

    def __init__(self, name: str, run_id: Optional[str] = None):
        mlflow = require("mlflow", "mlflow", "TrainerConfig.tracker = 'mlflow'")
        from mlflow.entities import Metric
        self._metric = Metric
        self._client = mlflow.MlflowClient()
        if run_id is None:
            experiment = os.environ.get("MLFLOW_EXPERIMENT_NAME", "rlf")
            found = self._client.get_experiment_by_name(experiment)
            experiment_id = (found.experiment_id if found is not None
                             else self._client.create_experiment(experiment))
            run_id = self._client.create_run(experiment_id, run_name=name).info.run_id
        else:
            self._client.update_run(run_id, status="RUNNING")
        self.run_id = run_id
        self._pending: List[Any] = []

    def log_params(self, params: Dict[str, str]) -> None:
        """Logs the parameters not logged yet (MLflow refuses to change a logged value, and a
        resumed run logs the same ones again)."""
        from mlflow.entities import Param
        logged = self._client.get_run(self.run_id).data.params
        new = [Param(k, v[:6000]) for k, v in params.items() if k not in logged]
        for i in range(0, len(new), 100):  # MLflow's limit of parameters per batch
            self._client.log_batch(self.run_id, params=new[i:i + 100])

    def log_scalar(self, tag: str, value: float, step: int) -> None:
        self._pending.append(self._metric(tag, float(value), int(time.time() * 1000), step))
        if len(self._pending) >= MLFLOW_BATCH:
            self.flush()

    def flush(self) -> None:
        if self._pending:
            self._client.log_batch(self.run_id, metrics=self._pending)
            self._pending = []

    def close(self, failed: bool = False) -> None:
        self.flush()
        self._client.set_terminated(self.run_id, status="FAILED" if failed else "FINISHED")


class WandbTracker(Tracker):
    """A W&B run in ``WANDB_PROJECT`` (else ``rlf``), its files under ``root_dir/wandb``;
    resumed by its id.

    Args:
        name: the run's name.
        root_dir: the rlf run's directory.
        run_id: the id of the run to continue; None starts a new run.

    Raises:
        MissingExtraError: without wandb (``pip install -e '.[wandb]'``).
    """

    def __init__(self, name: str, root_dir: Path, run_id: Optional[str] = None):
        wandb = require("wandb", "wandb", "TrainerConfig.tracker = 'wandb'")
        self._run = wandb.init(project=os.environ.get("WANDB_PROJECT", "rlf"), name=name,
                               dir=str(root_dir), id=run_id,
                               resume="must" if run_id else None, reinit="create_new")
        self.run_id = self._run.id

    def log_params(self, params: Dict[str, str]) -> None:
        self._run.config.update(params, allow_val_change=True)

    def log_scalar(self, tag: str, value: float, step: int) -> None:
        # W&B's own step must grow across tags whose steps differ (iterations, environment
        # steps): rlf's step is logged beside each scalar instead.
        self._run.log({tag: value, f"{tag}/step": step})

    def close(self, failed: bool = False) -> None:
        self._run.finish(exit_code=1 if failed else 0)


def check_tracker(name: Optional[str]) -> None:
    """Imports the tracker ``name``'s package, so that a missing extra stops the run before
    anything is written.

    Raises:
        MissingExtraError: for a tracker whose package is not installed.
    """
    if name is not None:
        require(name, name, f"TrainerConfig.tracker = {name!r}")


def make_tracker(name: str, root_dir: Path, run_id: Optional[str] = None) -> Tracker:
    """The ``Tracker`` ``name`` (``"mlflow"`` or ``"wandb"``) of the run in ``root_dir``,
    continuing the tracked run ``run_id`` where given.

    Raises:
        MissingExtraError: for a tracker whose package is not installed.
        ValueError: for another name.
    """
    root_dir = Path(root_dir)
    if name == "mlflow":
        return MlflowTracker(root_dir.name, run_id)
    if name == "wandb":
        return WandbTracker(root_dir.name, root_dir, run_id)
    raise ValueError(f"unknown tracker {name!r}: 'mlflow' or 'wandb'")
