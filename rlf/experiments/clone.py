"""A trial's rlf checkpoints as Ray Tune checkpoints, PBT's clone of another trial's run, and
the lineage a trial keeps of where its state came from.

A Tune checkpoint of a trial is a directory holding a copy of the run's
``ckpt-<iteration>.pt`` (with its replay-buffer companion where the run saves one) and
``rlf_checkpoint.json``: a new id, the trial, the iteration, the environment steps and the
trial's bindings. Loading one into a trial either continues the trial's own run (the checkpoint
is one the run saved or loaded since its last install, so the run's own newer checkpoints
descend from it) or installs it: the run's checkpoints at or after its iteration are set aside
(``ckpt-N.pt.superseded``), never deleted, and the copy becomes the newest checkpoint, from
which the run then resumes. ``lineage.json`` in the run's directory records the last
checkpoint and every install (which trial was cloned, at which iteration, with which values).
"""

from __future__ import annotations

import json
import shutil
import time
import uuid
from pathlib import Path
from typing import Any, Dict, List, Optional

from rlf.trainers.run_dir import REPLAY_BUFFER_COMPANION, model_state, run_checkpointer
from rlf.utils.atomic_file import atomic_write
from rlf.utils.checkpoint import set_aside
from rlf.utils.errors import UserError

__all__ = ["CHECKPOINT_INFO", "LINEAGE_FILE", "export_checkpoint", "read_checkpoint_info",
           "continues_from", "install_checkpoint", "read_lineage", "record_checkpoint",
           "restored_state", "state_digest",
           "amend_last_event"]

CHECKPOINT_INFO = "rlf_checkpoint.json"
LINEAGE_FILE = "lineage.json"


def export_checkpoint(checkpointer, step: int, env_steps: int, checkpoint_dir: Path,
                      trial: str, bindings: List[str]) -> Dict[str, Any]:
    """Copies the run's checkpoint of iteration ``step`` (``ckpt-<step>.pt`` of
    ``checkpointer``, with its replay-buffer companion where there is one) into the Tune
    checkpoint directory ``checkpoint_dir`` and writes its info (``rlf_checkpoint.json``);
    returns the info."""
    checkpoint_dir = Path(checkpoint_dir)
    files = [checkpointer.path(step)]
    companion = checkpointer.companion_path(REPLAY_BUFFER_COMPANION, step)
    if companion.is_file():
        files.append(companion)
    for f in files:
        shutil.copy2(f, checkpoint_dir / f.name)
    info = {"id": uuid.uuid4().hex, "trial": trial,
            "run_dir": str(checkpointer.ckpt_dir.parent), "iteration": int(step),
            "env_steps": int(env_steps), "bindings": list(bindings),
            "files": [f.name for f in files], "time": time.time()}
    (checkpoint_dir / CHECKPOINT_INFO).write_text(json.dumps(info, indent=1))
    return info


def read_checkpoint_info(checkpoint_dir: Path) -> Dict[str, Any]:
    """The ``rlf_checkpoint.json`` of a Tune checkpoint directory.

    Raises:
        UserError: if the directory holds none, or a file it lists is missing.
    """
    checkpoint_dir = Path(checkpoint_dir)
    try:
        info = json.loads((checkpoint_dir / CHECKPOINT_INFO).read_text())
    except (OSError, ValueError) as e:
        raise UserError(f"{checkpoint_dir} is not an rlf trial's checkpoint (no readable "
                        f"{CHECKPOINT_INFO}: {e})") from None
    missing = [f for f in info["files"] if not (checkpoint_dir / f).is_file()]
    if missing:
        raise UserError(f"the trial checkpoint {checkpoint_dir} lacks {', '.join(missing)}")
    return info


def read_lineage(run_dir: Path) -> Dict[str, Any]:
    """``run_dir/lineage.json``: ``{"last_checkpoint": id or None, "since_install": [ids],
    "events": [...]}``."""
    path = Path(run_dir) / LINEAGE_FILE
    if not path.is_file():
        return {"last_checkpoint": None, "since_install": [], "events": []}
    return json.loads(path.read_text())


def _write_lineage(run_dir: Path, lineage: Dict[str, Any]) -> None:
    Path(run_dir).mkdir(parents=True, exist_ok=True)
    with atomic_write(Path(run_dir) / LINEAGE_FILE) as tmp:
        tmp.write_text(json.dumps(lineage, indent=1))


def record_checkpoint(run_dir: Path, checkpoint_id: str) -> None:
    """Notes ``checkpoint_id`` as the last Tune checkpoint the run in ``run_dir`` saved, and
    as one of those its state has grown from since its last install (``"since_install"``)."""
    lineage = read_lineage(run_dir)
    lineage["last_checkpoint"] = checkpoint_id
    lineage.setdefault("since_install", []).append(checkpoint_id)
    _write_lineage(run_dir, lineage)


def continues_from(run_dir: Path, info: Dict[str, Any]) -> bool:
    """Whether the run in ``run_dir`` grew from the checkpoint ``info`` (one it saved or
    loaded since its last install: Tune may hand an earlier one than the last, when it
    stopped before recording the last) and has it or a newer one of its own, so that it
    resumes from its own newest checkpoint (written after the Tune checkpoint, e.g. at a
    stop) rather than go back."""
    lineage = read_lineage(run_dir)
    grown_from = lineage.get("since_install") or [lineage.get("last_checkpoint")]
    if info["id"] not in grown_from:
        return False
    found = run_checkpointer(run_dir).newest_complete()
    return found is not None and found[0] >= info["iteration"]


def install_checkpoint(checkpoint_dir: Path, info: Dict[str, Any], run_dir: Path,
                       trial: str, bindings: List[str], env_steps: Optional[int]) -> Dict:
    """Makes the Tune checkpoint ``checkpoint_dir`` the newest checkpoint of the run in
    ``run_dir`` and records the event in its lineage; returns the event.

    The run's own checkpoints at or after the checkpoint's iteration are set aside
    (``.superseded``); each copied file is written atomically.

    Args:
        checkpoint_dir: the Tune checkpoint (``export_checkpoint``).
        info: its ``read_checkpoint_info``.
        run_dir: the loading trial's rlf run directory.
        trial: the loading trial's name.
        bindings: the loading trial's bindings (PBT's mutated values, applied after the
            restore).
        env_steps: the environment steps the run had reached before (None: not started).
    """
    checkpointer = run_checkpointer(run_dir)
    ckpt_dir = checkpointer.ckpt_dir
    ckpt_dir.mkdir(parents=True, exist_ok=True)
    step = int(info["iteration"])
    for own in checkpointer.steps():
        if own >= step:
            for f in [checkpointer.path(own),
                      checkpointer.companion_path(REPLAY_BUFFER_COMPANION, own)]:
                if f.exists():
                    set_aside(f, "superseded")
    for name in info["files"]:
        with atomic_write(ckpt_dir / name) as tmp:
            shutil.copyfile(Path(checkpoint_dir) / name, tmp)
    event = {"time": time.time(), "kind": "clone" if info["trial"] != trial else "restore",
             "source_trial": info["trial"], "source_run_dir": info.get("run_dir"),
             "source_iteration": step,
             "source_env_steps": info["env_steps"], "source_bindings": info["bindings"],
             "bindings": list(bindings), "env_steps_before": env_steps}
    lineage = read_lineage(run_dir)
    lineage["last_checkpoint"] = info["id"]
    lineage["since_install"] = [info["id"]]
    lineage["events"].append(event)
    _write_lineage(run_dir, lineage)
    return event


def restored_state(trainer) -> Dict[str, Any]:
    """What a run holds after a restore, for its lineage: its iteration, environment steps
    and updates, every optimizer's learning rates and a SHA-256 of its parameters and
    buffers (``state_digest``)."""
    algorithm = trainer.algorithm
    return {"iteration": trainer.iterations, "env_steps": int(algorithm.get_env_steps()),
            "num_updates": int(algorithm.num_updates),
            "lr": [[float(g["lr"]) for g in opt.param_groups]
                   for opt in trainer.loop.learner.optimizers],
            "digest": state_digest(algorithm.state_dict())}


def state_digest(state: Dict[str, Any]) -> str:
    """SHA-256 over the tensors of an algorithm's state (a checkpoint's ``"algorithm"``
    entry): its parameters and buffers by name, without the metrics, optimizers and
    schedules (``run_dir.model_state``)."""
    import hashlib

    import torch

    model = model_state({"algorithm": state})
    h = hashlib.sha256()
    for name in sorted(model):
        value = model[name]
        if isinstance(value, torch.Tensor):
            h.update(name.encode())
            h.update(value.detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()


def amend_last_event(run_dir: Path, event: Dict[str, Any]) -> None:
    """Rewrites the last lineage event of ``run_dir`` as ``event``."""
    lineage = read_lineage(run_dir)
    lineage["events"][-1] = event
    _write_lineage(run_dir, lineage)
