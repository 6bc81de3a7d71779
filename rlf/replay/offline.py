"""Offline replay checkpoints: read rlf's and ALF's replay-buffer files into a ReplayBuffer.

File layout (ALF's, also what rlf writes with ``TrainerConfig.save_replay_buffer``):
``{"algorithm": {"<prefix>_replay_buffer.<key>": tensor, ...}, ...}`` where ``<key>`` is a
nest path with ``|`` for ``.`` (``time_step|reward``, ``rollout_info|rl|action``) and leaves
are ``[num_envs, max_length, ...]`` rings, plus ``_current_pos`` (steps ever written per
environment) and ``_current_size`` (steps held). Tensors are matched to a data spec **by key**,
never by position; keys the spec does not ask for are ignored.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, Union

import torch

from rlf import nest
from rlf.replay.replay_buffer import ReplayBuffer
from rlf.tensor_specs import TensorSpec
from rlf.utils.checkpoint import atomic_save, file_steps, load_checkpoint_file

__all__ = ["load_replay_checkpoint", "chronological", "make_offline_replay_buffer",
           "replay_buffer_path", "replay_buffer_steps", "export_replay_buffer"]

_MARK = "_replay_buffer."


def load_replay_checkpoint(path: Union[str, os.PathLike]) -> Dict[str, torch.Tensor]:
    """Reads a replay-buffer checkpoint file.

    Returns:
        ``{key: tensor}`` with the keys stripped to the part after ``_replay_buffer.``
        (``time_step|reward``, ``_current_pos``, ...).

    Raises:
        FileNotFoundError: if the file does not exist.
        ValueError: naming the file if it is unreadable or truncated, or holds no replay
            buffer (no ``..._replay_buffer.*`` keys under ``'algorithm'``).
    """
    state = load_checkpoint_file(path)
    algorithm = state.get("algorithm") if isinstance(state, Mapping) else None
    if not isinstance(algorithm, Mapping):
        raise ValueError(f"replay checkpoint {path} has no 'algorithm' dict (top-level keys: "
                         f"{sorted(state) if isinstance(state, Mapping) else type(state)})")
    out = {k[k.index(_MARK) + len(_MARK):]: v for k, v in algorithm.items() if _MARK in k}
    if not out:
        raise ValueError(f"replay checkpoint {path} holds no '..._replay_buffer.*' keys under "
                         f"'algorithm' (found {sorted(algorithm)[:8]})")
    for k in ("_current_pos", "_current_size"):
        if k not in out:
            raise ValueError(f"replay checkpoint {path} lacks '_replay_buffer.{k}'")
    return out


def chronological(data: torch.Tensor, current_pos: torch.Tensor, current_size: torch.Tensor,
                  length: Optional[int] = None) -> List[torch.Tensor]:
    """Each environment's held steps, oldest first, from a ring ``[E, L, ...]``.

    Args:
        data: ``[E, L, ...]`` ring storage.
        current_pos: ``[E]`` steps ever written per environment.
        current_size: ``[E]`` steps held.
        length: keep only the first (oldest) ``length`` steps of each environment.

    Returns:
        ``E`` tensors ``[n_e, ...]``.
    """
    max_length = data.shape[1]
    out = []
    for e in range(data.shape[0]):
        size = int(current_size[e])
        first = int(current_pos[e]) - size
        slots = (first + torch.arange(size)) % max_length
        if length is not None:
            slots = slots[:length]
        out.append(data[e, slots])
    return out


def _key(path: str) -> str:
    return path.replace(".", "|")


def make_offline_replay_buffer(files: Union[str, os.PathLike, Sequence],
                               data_spec: Any,
                               length: Optional[int] = None,
                               aliases: Optional[Mapping[str, str]] = None,
                               name: str = "offline_replay_buffer",
                               **buffer_kwargs) -> ReplayBuffer:
    """A ``ReplayBuffer`` holding the data of one or more replay checkpoints.

    Every environment ring of every file becomes one environment of the new buffer (files
    are stacked along the environment axis), its steps in time order.

    Args:
        files: a path or a list of paths.
        data_spec: nest of ``TensorSpec`` of one step (e.g. an ``Experience`` of specs); each
            leaf is read from the key of its path (``time_step.reward`` -> ``time_step|reward``).
        length: steps per environment taken from each file (the oldest); all if None.
        aliases: ``{our key: key in the file}`` for data stored under other names (e.g. ALF's
            ``rollout_info|rl|action_distribution|loc``).
        name: the buffer's name.
        **buffer_kwargs: passed to ``ReplayBuffer`` (``prioritized_sampling``, ...).

    Returns:
        The filled ``ReplayBuffer`` (``max_length`` = the longest environment's step count).

    Raises:
        ValueError: for a missing key, or a leaf whose shape or dtype does not fit the spec,
            naming the file, the key, the expected and the found shape; for an unreadable
            file (naming it). Nothing on disk is touched.
    """
    files = [files] if isinstance(files, (str, os.PathLike)) else list(files)
    if not files:
        raise ValueError("make_offline_replay_buffer: no files given")
    aliases = dict(aliases or {})
    paths = [p for p, _ in nest.flatten_with_path(data_spec)]
    specs: List[TensorSpec] = nest.flatten(data_spec)
    per_leaf: List[List[torch.Tensor]] = [[] for _ in paths]
    for f in files:
        ckpt = load_replay_checkpoint(f)
        pos, size = ckpt["_current_pos"], ckpt["_current_size"]
        for i, (path, spec) in enumerate(zip(paths, specs)):
            key = _key(path)
            found_key = key if key in ckpt else aliases.get(key)
            if found_key not in ckpt:
                raise ValueError(
                    f"replay checkpoint {f} has no '{key}' (needed for {path} "
                    f"{tuple(spec.shape)} {spec.dtype}); it has "
                    f"{sorted(k for k in ckpt if not k.startswith('_'))}")
            t = ckpt[found_key]
            if t.ndim < 2 or tuple(t.shape[2:]) != tuple(spec.shape):
                raise ValueError(
                    f"replay checkpoint {f}: '{found_key}' has shape {tuple(t.shape)}, expected "
                    f"[num_envs, max_length, {', '.join(map(str, spec.shape))}] for {path} "
                    f"(spec shape {tuple(spec.shape)})")
            if t.dtype != spec.dtype:
                if t.dtype.is_floating_point != spec.dtype.is_floating_point:
                    raise ValueError(f"replay checkpoint {f}: '{found_key}' has dtype {t.dtype}, "
                                     f"expected {spec.dtype} for {path}")
                t = t.to(spec.dtype)
            per_leaf[i].extend(chronological(t, pos, size, length))
    counts = [x.shape[0] for x in per_leaf[0]]
    num_envs, max_length = len(counts), max(counts)
    if max_length == 0:
        raise ValueError(f"replay checkpoints {files} hold no steps")
    buffer = ReplayBuffer(data_spec, num_envs, max_length, name=name, **buffer_kwargs)
    state = buffer.state_dict()
    with torch.no_grad():
        for path, rows in zip(paths, per_leaf):
            store = state[_key(path)]
            for e, r in enumerate(rows):
                store[e, :r.shape[0]] = r
        steps = torch.tensor(counts, dtype=torch.int64)
        state["_current_pos"].copy_(steps)
        state["_current_size"].copy_(steps)
    buffer.load_state_dict(state)  # validates, and rebuilds priorities if any
    return buffer


def replay_buffer_path(ckpt_dir: Union[str, os.PathLike], step: int) -> Path:
    """The file the trainer writes the replay buffer of iteration ``step`` to
    (``<ckpt_dir>/replay_buffer-<step>.pt``, beside ``ckpt-<step>.pt``)."""
    return Path(ckpt_dir) / f"replay_buffer-{int(step)}.pt"


def replay_buffer_steps(ckpt_dir: Union[str, os.PathLike]) -> List[int]:
    """The iterations of the ``replay_buffer-<step>.pt`` files in ``ckpt_dir``, ascending;
    other names (``replay_buffer-old.pt``, a user's copy) are ignored."""
    return file_steps(ckpt_dir, "replay_buffer")


def export_replay_buffer(root_dir: Union[str, os.PathLike], out: Union[str, os.PathLike],
                         step: Optional[int] = None) -> Path:
    """Copies the run's replay buffer (newest or at ``step``) to ``out``, atomically.

    Args:
        root_dir: the run's directory (its ``ckpt/`` holds ``replay_buffer-<step>.pt``, written
            with ``TrainerConfig.save_replay_buffer``).
        out: the file to write; ``TrainerConfig.offline_buffer_dir`` and
            ``make_offline_replay_buffer`` take it.
        step: the iteration to export; None for the newest.

    Returns:
        The path written.

    Raises:
        FileNotFoundError: if the run has no replay file (naming the setting that writes it).
        ValueError: if the file is unreadable or holds no replay buffer.
    """
    ckpt = Path(root_dir) / "ckpt"
    steps = replay_buffer_steps(ckpt)
    if step is not None:
        steps = [s for s in steps if s == step]
    if not steps:
        raise FileNotFoundError(f"no replay_buffer-*.pt in {ckpt}{f' for step {step}' if step is not None else ''}"
                                f": train with TrainerConfig.save_replay_buffer = True")
    path = replay_buffer_path(ckpt, steps[-1])
    load_replay_checkpoint(path)  # validates
    return atomic_save(load_checkpoint_file(path), out)
