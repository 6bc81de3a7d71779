"""The check that Tune's saved experiment state is whole before an experiment resumes.

Tune writes its state into a staging directory and copies it into the experiment's
directory at the end of each of its steps. A driver killed during that copy leaves a file cut
short there. Ray Tune's resume then fails on it, logs "Failed to restore the run state", and
starts the experiment anew with an empty configuration: a trial with none of the
experiment's values, in a new run directory, while the real trials are never resumed.
``check_tune_state`` finds such a file first and either sets it aside (when the resume does
not need it) or refuses in one line.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import List

from rlf.utils.errors import UserError

#: The state of each of Tune's driver sessions: the trials and the controller.
EXPERIMENT_STATE = "experiment_state-*.json"
#: The state of Tune's search algorithm (``BasicVariantGenerator``): the trials it has still
#: to create. A pickle, despite its name.
SEARCHER_STATE = "basic-variant-state-*.json"
#: The suffix a cut-short searcher state is renamed with: Tune neither reads nor copies it.
SET_ASIDE = ".unreadable"


def _newest(experiment_dir: Path, pattern: str) -> List[Path]:
    # Tune takes the greatest name (the session's start time) as the newest.
    return sorted(experiment_dir.glob(pattern), key=lambda p: p.name, reverse=True)


def _trial_count(path: Path) -> int:
    """The number of trials the experiment state ``path`` holds.

    Raises:
        ValueError: if it is not a whole JSON document with a ``trial_data`` list.
    """
    state = json.loads(path.read_text())
    trials = state.get("trial_data") if isinstance(state, dict) else None
    if not isinstance(trials, list):
        raise ValueError("no trial_data list")
    return len(trials)


def _readable_pickle(path: Path) -> bool:
    import ray.cloudpickle as cloudpickle
    try:
        with open(path, "rb") as f:
            cloudpickle.load(f)
    except Exception:  # noqa: BLE001 (any failure is a file Tune's resume cannot read)
        return False
    return True


def check_tune_state(experiment_dir: Path, num_trials: int) -> None:
    """Makes sure Tune's resume of ``experiment_dir`` reads a whole state.

    When the newest searcher state is cut short and the experiment state already holds
    every one of the ``num_trials`` trials, every searcher state is renamed with the suffix
    ``SET_ASIDE`` (kept, never deleted): the resume needs no trial created, and Tune without
    a searcher state creates none.

    Args:
        experiment_dir: Tune's directory of the experiment (``root_dir/.tune``).
        num_trials: the number of trials the experiment has in all
            (``SearchSpace.num_trials``).

    Raises:
        UserError: if the newest experiment state or ``tuner.pkl`` cannot be read, or a
            searcher state cannot be read while trials remain to be created.
    """
    states = _newest(experiment_dir, EXPERIMENT_STATE)
    if not states:
        return  # Tune's own error: nothing to resume from
    try:
        held = _trial_count(states[0])
    except (OSError, ValueError) as e:
        raise UserError(
            f"Tune's experiment state {states[0]} cannot be read ({type(e).__name__}: {e}); "
            f"its driver was killed while writing it, so the experiment cannot resume: start "
            f"it in a new --root_dir (each run's own checkpoints in this one are intact)"
        ) from None
    tuner = experiment_dir / "tuner.pkl"
    if tuner.is_file() and not _readable_pickle(tuner):
        raise UserError(f"Tune's {tuner} cannot be read, so the experiment cannot resume: "
                        f"start it in a new --root_dir")
    searchers = _newest(experiment_dir, SEARCHER_STATE)
    if not searchers or _readable_pickle(searchers[0]):
        return
    if held < num_trials:
        raise UserError(
            f"Tune's search state {searchers[0]} cannot be read (its driver was killed while "
            f"writing it) and {num_trials - held} of the experiment's {num_trials} trials are "
            f"not created yet, so the experiment cannot resume them: start it in a new "
            f"--root_dir")
    # Every searcher state goes: an older one, of a session that had not created every
    # trial yet, would create them again.
    for path in searchers:
        path.rename(path.with_name(path.name + SET_ASIDE))
    print(f"[tune] {searchers[0].name} was cut short when its driver was killed; every trial "
          f"exists, so the resume goes on without a search state (kept with the suffix "
          f"{SET_ASIDE})", flush=True)
