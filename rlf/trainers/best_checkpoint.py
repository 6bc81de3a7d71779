"""The best evaluation's policy, kept beside a run's newest checkpoints as ``ckpt/best.pt``.

After each evaluation of a run with ``TrainerConfig.evaluate``, the policy is written there
when its evaluation beat every earlier one of the run (resumed sessions included: the best
value is read back from the file when a run resumes). The file holds what playing a policy needs,
``{"algorithm": model state, "best": {"iteration", "env_steps", "metric", "value"}}``, the
same layout as a checkpoint's for ``rlf.bin.play --checkpoint best`` and
``rlf.load_policy(run, checkpoint="best")``; retention never removes it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, Optional

from rlf.utils.checkpoint import atomic_save, load_checkpoint_file
from rlf.utils.errors import UserError

__all__ = ["BEST_CHECKPOINT", "best_checkpoint_path", "existing_best_checkpoint", "best_value",
           "evaluation_value", "save_best"]

#: The file name of the best evaluation's policy in ``ckpt/``.
BEST_CHECKPOINT = "best.pt"


def best_checkpoint_path(root_dir: Path) -> Path:
    """``root_dir/ckpt/best.pt``."""
    return Path(root_dir) / "ckpt" / BEST_CHECKPOINT


def existing_best_checkpoint(root_dir: Path, asked_as: str) -> Path:
    """``root_dir/ckpt/best.pt``, which must exist.

    Args:
        root_dir: the run's directory.
        asked_as: how the caller's user asked for it (``"--checkpoint best"``), for the line.

    Raises:
        UserError: where the run has not kept one (it has not evaluated yet).
    """
    best = best_checkpoint_path(root_dir)
    if not best.is_file():
        raise UserError(f"{asked_as}: {best} does not exist: the run has not evaluated yet "
                        f"(TrainerConfig.evaluate = True keeps the best evaluation's policy "
                        f"there)")
    return best


def best_value(root_dir: Path) -> Optional[float]:
    """The value of the run's ``best.pt``, or None where there is none (or it is unreadable:
    the next evaluation then replaces it)."""
    path = best_checkpoint_path(root_dir)
    if not path.is_file():
        return None
    try:
        return float(load_checkpoint_file(path)["best"]["value"])
    except (ValueError, KeyError, TypeError, OSError):
        return None


def evaluation_value(result: Dict[str, Any]) -> tuple:
    """``(metric, value)`` that ranks an evaluation: the game's score
    (``AverageEpisodeScore``, Atari) where there is one, else ``AverageReturn``."""
    metric = "AverageEpisodeScore" if "AverageEpisodeScore" in result else "AverageReturn"
    return metric, float(result[metric])


def save_best(root_dir: Path, algorithm, result: Dict[str, Any], iteration: int,
              best: Optional[float]) -> Optional[float]:
    """Writes ``algorithm``'s policy to ``ckpt/best.pt`` (atomically) if ``result`` beats
    ``best``.

    Args:
        root_dir: the run directory.
        algorithm: the evaluated algorithm.
        result: the evaluation (``evaluate_episodes``'s).
        iteration: the iteration it followed.
        best: the best value so far, or None.

    Returns:
        The new best value, or ``best`` if this evaluation did not beat it.

    Raises:
        OSError: if the file cannot be written (the one before is kept).
    """
    from rlf.trainers.run_dir import model_state
    metric, value = evaluation_value(result)
    if best is not None and value <= best:
        return best
    state = model_state({"algorithm": algorithm.state_dict()})
    atomic_save({"algorithm": state, "best": {"iteration": int(iteration),
                                              "env_steps": int(algorithm.get_env_steps()),
                                              "metric": metric, "value": value}},
                best_checkpoint_path(root_dir))
    return value
