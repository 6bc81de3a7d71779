"""Offline replay checkpoints: read rlf's and ALF's replay-buffer files into a ReplayBuffer.

File layout (ALF's, also what rlf writes with ``TrainerConfig.save_replay_buffer``):
``{"algorithm": {"<prefix>_replay_buffer.<key>": tensor, ...}, ...}`` where ``<key>`` is a
nest path with ``|`` for ``.`` (``time_step|reward``, ``rollout_info|rl|action``) and leaves
are ``[num_envs, max_length, ...]`` rings, plus ``_current_pos`` (steps ever written per
environment) and ``_current_size`` (steps held). Tensors are matched to a data spec **by key**,
never by position; keys the spec does not ask for are ignored.

Every file is validated before a single step is used (``validate_replay_data``): the leaves
share one ``[num_envs, max_length]`` outer shape, ``0 <= _current_size <= max_length``
and ``_current_pos >= _current_size`` per environment, step types are FIRST/MID/LAST, and
bounded actions lie inside the action spec's bounds. A file that fails raises
``OfflineDataError``: one line naming the file, the key, and what was expected and found.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import (Any, Callable, Dict, List, Mapping, NamedTuple, Optional, Sequence, Tuple,
                    Union)

import torch

from rlf import nest
from rlf.data_structures import StepType
from rlf.replay.replay_buffer import ReplayBuffer
from rlf.tensor_specs import BoundedTensorSpec, TensorSpec
from rlf.utils.checkpoint import (CorruptCheckpointError, atomic_save, file_steps,
                                  load_checkpoint_file)
from rlf.utils.errors import UserError

__all__ = ["OfflineDataError", "OfflineLayout", "load_replay_checkpoint", "validate_replay_data",
           "chronological", "offline_files", "make_offline_replay_buffer", "replay_buffer_path",
           "replay_buffer_steps", "export_replay_buffer"]

_MARK = "_replay_buffer."


class OfflineDataError(UserError):
    """An offline replay file is missing, unreadable, inconsistent, or does not fit the
    algorithm's data spec; the message names the file and the key."""


class OfflineLayout(NamedTuple):
    """How an algorithm reads offline replay files (``RLAlgorithm.offline_layout``).

    Attributes:
        spec: ``Experience`` of ``TensorSpec`` of one step: what is read from a file (by key,
            ``nest.flatten_with_path`` with ``|``) and what ``train_step`` then receives.
        aliases: ``{key of spec: key in the file, or a list of keys tried in order}`` for
            data stored under other names (ALF's, another algorithm's).
    """

    spec: Any
    aliases: Dict[str, Any]


def _few(values: torch.Tensor, n: int = 4) -> str:
    items = values.flatten().tolist()
    return str(items[:n])[:-1] + (", ...]" if len(items) > n else "]")


_EXPORT = ("export a run's replay buffer as one file with python -m rlf.bin.export_replay "
           "--root_dir RUN --out FILE (trained with TrainerConfig.save_replay_buffer = True)")


def load_replay_checkpoint(path: Union[str, os.PathLike]) -> Dict[str, torch.Tensor]:
    """Reads a replay-buffer checkpoint file.

    Returns:
        ``{key: tensor}`` with the keys stripped to the part after ``_replay_buffer.``
        (``time_step|reward``, ``_current_pos``, ...).

    Raises:
        OfflineDataError: (a ``ValueError``) naming the file if it does not exist, is
            unreadable or truncated, holds no replay buffer (no ``..._replay_buffer.*`` keys
            under ``'algorithm'``), or fails ``validate_replay_data``.
    """
    try:
        state = load_checkpoint_file(path)
    except FileNotFoundError:
        raise OfflineDataError(f"replay checkpoint {path} does not exist") from None
    except CorruptCheckpointError as e:
        raise OfflineDataError(f"replay {e}") from None
    algorithm = state.get("algorithm") if isinstance(state, Mapping) else None
    if not isinstance(algorithm, Mapping):
        raise OfflineDataError(
            f"replay checkpoint {path} has no 'algorithm' dict (top-level keys: "
            f"{sorted(state) if isinstance(state, Mapping) else type(state)})")
    out = {k[k.index(_MARK) + len(_MARK):]: v for k, v in algorithm.items() if _MARK in k}
    if not out and "trainer" in state:  # a run's ckpt-<N>.pt: the policy, not its data
        raise OfflineDataError(f"{path} is a training checkpoint (the policy and optimizers), "
                               f"not replay data; {_EXPORT}")
    if not out:
        raise OfflineDataError(f"replay checkpoint {path} holds no '..._replay_buffer.*' keys "
                               f"under 'algorithm' (found {sorted(algorithm)[:8]})")
    for k in ("_current_pos", "_current_size"):
        if k not in out:
            raise OfflineDataError(f"replay checkpoint {path} lacks '_replay_buffer.{k}'")
    validate_replay_data(path, out)
    return out


def validate_replay_data(path: Union[str, os.PathLike], data: Mapping[str, Any]) -> None:
    """Checks a replay checkpoint's tensors (``load_replay_checkpoint``'s output) for
    consistency, so that no step is wrapped, repeated or made up.

    - ``_current_pos`` and ``_current_size`` are integer ``[num_envs]`` tensors;
    - every data leaf (every key not starting with ``_``) is a tensor of outer shape
      ``[num_envs, max_length]``, the same for all;
    - ``0 <= _current_size <= max_length`` and ``_current_pos >= _current_size`` for every
      environment (``_current_pos`` counts the steps ever written, ``_current_size`` those
      held);
    - the held steps' ``time_step|step_type`` values are FIRST, MID or LAST.

    Args:
        path: the file, for the messages.
        data: ``{key: tensor}`` with the ``..._replay_buffer.`` prefix stripped.

    Raises:
        OfflineDataError: naming the file, the key, and the expected and found values.
    """
    pos, size = data["_current_pos"], data["_current_size"]
    for key, t in (("_current_pos", pos), ("_current_size", size)):
        if not isinstance(t, torch.Tensor) or t.ndim != 1 or t.dtype.is_floating_point:
            raise OfflineDataError(
                f"replay checkpoint {path}: '{key}' should be an integer [num_envs] tensor, "
                f"found {tuple(t.shape) if isinstance(t, torch.Tensor) else type(t).__name__}"
                f" {getattr(t, 'dtype', '')}".rstrip())
    if pos.shape != size.shape:
        raise OfflineDataError(f"replay checkpoint {path}: '_current_pos' has shape "
                               f"{tuple(pos.shape)}, '_current_size' {tuple(size.shape)}; "
                               f"expected both [num_envs]")
    num_envs = pos.shape[0]
    leaves = {k: v for k, v in sorted(data.items()) if not k.startswith("_")}
    outer, first = None, None
    for key, t in leaves.items():
        if not isinstance(t, torch.Tensor) or t.ndim < 2:
            raise OfflineDataError(
                f"replay checkpoint {path}: '{key}' has shape "
                f"{tuple(t.shape) if isinstance(t, torch.Tensor) else type(t).__name__}; "
                f"expected [num_envs, max_length, ...]")
        if outer is None:
            outer, first = tuple(t.shape[:2]), key
            if outer[0] != num_envs:
                raise OfflineDataError(
                    f"replay checkpoint {path}: '{key}' holds {outer[0]} environments, "
                    f"'_current_pos' {num_envs}; expected the same number")
        elif tuple(t.shape[:2]) != outer:
            raise OfflineDataError(
                f"replay checkpoint {path}: '{key}' has outer shape {list(t.shape[:2])}, "
                f"expected [num_envs, max_length] = {list(outer)} as '{first}' has")
    if outer is None:
        raise OfflineDataError(f"replay checkpoint {path} holds no data leaves (only "
                               f"{sorted(data)})")
    max_length = outer[1]
    bad = (size < 0) | (size > max_length)
    if bad.any():
        raise OfflineDataError(
            f"replay checkpoint {path}: '_current_size' is {_few(size[bad])} for environments "
            f"{_few(bad.nonzero().flatten())}; expected 0 <= _current_size <= max_length = "
            f"{max_length}")
    bad = pos < size
    if bad.any():
        raise OfflineDataError(
            f"replay checkpoint {path}: '_current_pos' {_few(pos[bad])} is below "
            f"'_current_size' {_few(size[bad])} for environments {_few(bad.nonzero().flatten())}"
            f"; expected _current_pos (steps written) >= _current_size (steps held)")
    step_type = leaves.get("time_step|step_type")
    if step_type is not None:
        held = torch.cat(chronological(step_type, pos, size)) if num_envs else step_type[:0, 0]
        valid = (held == StepType.FIRST) | (held == StepType.MID) | (held == StepType.LAST)
        if not valid.all():
            raise OfflineDataError(
                f"replay checkpoint {path}: 'time_step|step_type' holds {_few(held[~valid])}; "
                f"expected only FIRST ({StepType.FIRST}), MID ({StepType.MID}) or LAST "
                f"({StepType.LAST})")


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


def offline_files(files: Union[str, os.PathLike, Sequence]) -> List[Path]:
    """The replay checkpoint files that ``files`` names: a file, a directory (every ``*.pt``
    in it, in name order), or a list of those.

    Raises:
        OfflineDataError: for a path that does not exist, a directory without ``*.pt``
            files, no files at all, or a file named twice.
    """
    entries = [files] if isinstance(files, (str, os.PathLike)) else list(files)
    out: List[Path] = []
    for entry in entries:
        path = Path(entry)
        if path.is_dir():
            found = sorted(p for p in path.glob("*.pt") if p.is_file())
            if not found and (path / "ckpt").is_dir():  # a run's --root_dir
                raise OfflineDataError(f"offline replay directory {path} is a training run's "
                                       f"directory, not replay data; {_EXPORT}")
            if not found:
                raise OfflineDataError(f"offline replay directory {path} holds no *.pt files")
            out.extend(found)
        elif path.is_file():
            out.append(path)
        else:
            raise OfflineDataError(f"offline replay file or directory {path} does not exist")
    if not out:
        raise OfflineDataError("no offline replay files given")
    seen: Dict[Path, Path] = {}
    for path in out:  # a file named twice (or by a file and its directory) would count twice
        first = seen.setdefault(path.resolve(), path)
        if first is not path:
            raise OfflineDataError(f"offline replay file {path} is named twice (also as "
                                   f"{first}): its steps would be counted twice")
    return out


def _action_leaves(data_spec: Any, action_spec: Any) -> Dict[str, BoundedTensorSpec]:
    """The data spec's leaves (by path) whose spec is one of ``action_spec``'s bounded
    leaves: the action, the previous action, a recorded behaviour action."""
    actions = [s for s in nest.flatten(action_spec) if isinstance(s, BoundedTensorSpec)]
    return {path: spec for path, spec in nest.flatten_with_path(data_spec)
            if isinstance(spec, BoundedTensorSpec) and any(spec == a for a in actions)}


def _check_actions(f: Path, key: str, t: torch.Tensor, spec: BoundedTensorSpec,
                   normalized: Optional[bool]) -> torch.Tensor:
    """Checks (and with ``normalized`` rescales) one action leaf's held values ``[N, ...]``."""
    low, high = spec.bounds(torch.float64)
    if t.numel() == 0:
        return t
    values = t.to(torch.float64)
    found = f"[{values.min().item():.4g}, {values.max().item():.4g}]"
    if normalized and spec.dtype.is_floating_point:
        if (values.abs() > 1.0 + 1e-6).any():
            raise OfflineDataError(
                f"replay checkpoint {f}: '{key}' holds values in {found}, outside [-1, 1], "
                f"but TrainerConfig.offline_normalized_actions = True says they are normalised")
        return (low + (values.clamp(-1.0, 1.0) + 1.0) * 0.5 * (high - low)).to(spec.dtype)
    outside = (values < low) | (values > high)
    if outside.any():
        raise OfflineDataError(
            f"replay checkpoint {f}: '{key}' holds values in {found}, outside the action "
            f"spec's bounds [{spec.minimum.min()}, {spec.maximum.max()}]"
            + ("; set TrainerConfig.offline_normalized_actions = True if they are normalised "
               "to [-1, 1]" if (values.abs() <= 1.0).all() else ""))
    wider = bool(((low < -1.0) | (high > 1.0)).any())
    if (normalized is None and spec.dtype.is_floating_point and wider
            and bool((values.abs() <= 1.0).all())):
        raise OfflineDataError(
            f"replay checkpoint {f}: '{key}' holds values in {found}, all inside [-1, 1], "
            f"while the action spec's bounds are [{spec.minimum.min()}, "
            f"{spec.maximum.max()}]: the file looks normalised (ALF records actions so); set "
            f"TrainerConfig.offline_normalized_actions = True to rescale them to the bounds, "
            f"or = False to use them as they are")
    return t


def _read_leaf(f, ckpt: Mapping[str, Any], path: str, spec: TensorSpec,
               stored: Tuple[int, ...], aliases: Mapping[str, Any]
               ) -> Tuple[str, torch.Tensor]:
    """``(key, [num_envs, max_length, *stored] tensor)``: leaf ``path`` of replay checkpoint
    ``f`` under its key or an alias, whole frame stacks cut to their newest frame where the
    buffer stores single frames (``stored``), in the spec's dtype.

    Raises:
        OfflineDataError: for a missing key, another shape, or a float/integer mismatch.
    """
    key = _key(path)
    candidates = aliases.get(key, ())
    candidates = [candidates] if isinstance(candidates, str) else list(candidates)
    found_key = next((k for k in [key] + candidates if k in ckpt), None)
    if found_key is None:
        raise OfflineDataError(
            f"replay checkpoint {f} has no "
            f"{' or '.join(repr(k) for k in [key] + candidates)} (needed for {path} "
            f"{tuple(spec.shape)} {spec.dtype}); it has "
            f"{sorted(k for k in ckpt if not k.startswith('_'))}")
    t = ckpt[found_key]
    step_shape, full = tuple(t.shape[2:]), tuple(spec.shape)
    if step_shape == full and stored != full:
        t = t[:, :, -1]  # whole stacks into a buffer of single frames: the newest
    elif step_shape != stored:
        single = (f" (or single frames [num_envs, max_length, "
                  f"{', '.join(map(str, stored))}])" if stored != full else "")
        hint = ("; a file of single frames needs the stacking configured, e.g. "
                f"ReplayBuffer.stacked_frames = {{'{path}': {full[0]}}}"
                if stored == full and full and step_shape == full[1:] else "")
        raise OfflineDataError(
            f"replay checkpoint {f}: '{found_key}' has shape {tuple(t.shape)}, expected "
            f"[num_envs, max_length, {', '.join(map(str, full))}]{single} for {path} "
            f"(spec shape {full}){hint}")
    if t.dtype != spec.dtype:
        if t.dtype.is_floating_point != spec.dtype.is_floating_point:
            raise OfflineDataError(
                f"replay checkpoint {f}: '{found_key}' has dtype {t.dtype}, expected "
                f"{spec.dtype} for {path}")
        t = t.to(spec.dtype)
    return found_key, t


def make_offline_replay_buffer(files: Union[str, os.PathLike, Sequence],
                               data_spec: Any,
                               length: Optional[int] = None,
                               aliases: Optional[Mapping[str, Union[str, Sequence[str]]]] = None,
                               name: str = "offline_replay_buffer",
                               action_spec: Any = None,
                               normalized_actions: Optional[bool] = False,
                               buffer_ctor: Callable[..., ReplayBuffer] = ReplayBuffer,
                               **buffer_kwargs) -> ReplayBuffer:
    """A ``ReplayBuffer`` holding the data of one or more replay checkpoints.

    Every environment ring of every file becomes one environment of the new buffer (files
    are stacked along the environment axis), its steps in time order. Every file is checked
    (``validate_replay_data``, shapes and dtypes against ``data_spec``, action bounds)
    before the buffer is filled.

    Stacked frames: where the buffer stores only the newest frame of a stacked field
    (``ReplayBuffer.stacked_frames``, e.g. ``{"time_step.observation": 4}``), a file may hold
    that field as single frames ``[num_envs, max_length, 84, 84]`` (what such a buffer
    saves, rlf's Atari confs included) or as whole stacks ``[..., 4, 84, 84]``, of which the
    newest frame is kept; sampling re-stacks them either way.

    Args:
        files: a path, a directory (every ``*.pt`` in it, in name order) or a list of those.
        data_spec: nest of ``TensorSpec`` of one step (e.g. an ``Experience`` of specs); each
            leaf is read from the key of its path (``time_step.reward`` -> ``time_step|reward``).
        length: steps per environment taken from each file (the oldest); all if None.
        aliases: ``{our key: key in the file}`` for data stored under other names (e.g. ALF's
            ``rollout_info|rl|action_distribution|loc``), or ``{our key: [key, ...]}``: the
            first of them the file has.
        name: the buffer's name.
        action_spec: the algorithm's action spec; the data spec's leaves equal to one of its
            bounded leaves (actions, previous actions) are checked against its bounds. None
            checks no bounds.
        normalized_actions: False: actions are in the spec's units. True: they are
            normalised to [-1, 1] (ALF's ``suite_gym`` records them so) and are rescaled
            affinely to the spec's bounds: ``low + (a + 1) (high - low) / 2``. None: as
            False, but a float action leaf whose values all lie in [-1, 1] while the spec's
            bounds are wider is refused as probably normalised.
        buffer_ctor: builds the buffer, called as ``ReplayBuffer`` is (``data_spec``,
            ``num_environments``, ``max_length``, ``name``, ``**buffer_kwargs``); the
            algorithm's own, so that gin's ``ReplayBuffer.stacked_frames`` applies.
        **buffer_kwargs: passed to ``buffer_ctor`` (``sampler``, ...).

    Returns:
        The filled ``ReplayBuffer`` (``max_length`` = the longest environment's step count).

    Raises:
        OfflineDataError: (a ``ValueError``) for a missing file or key, an inconsistent file,
            a leaf whose shape or dtype does not fit the spec, or actions outside the bounds,
            naming the file, the key, the expected and the found values. Nothing on disk is
            touched.
    """
    files = offline_files(files)
    aliases = dict(aliases or {})
    paths = [p for p, _ in nest.flatten_with_path(data_spec)]
    specs: List[TensorSpec] = nest.flatten(data_spec)
    # The shape the buffer stores per step: the spec's, or one frame of a stacked field.
    probe = buffer_ctor(data_spec, 1, 1, name=name, **buffer_kwargs).state_dict()
    stored = [tuple(probe[_key(p)].shape[2:]) for p in paths]
    bounded = _action_leaves(data_spec, action_spec) if action_spec is not None else {}
    per_leaf: List[List[torch.Tensor]] = [[] for _ in paths]
    for f in files:
        ckpt = load_replay_checkpoint(f)
        pos, size = ckpt["_current_pos"], ckpt["_current_size"]
        for i, (path, spec) in enumerate(zip(paths, specs)):
            found_key, t = _read_leaf(f, ckpt, path, spec, stored[i], aliases)
            rows = chronological(t, pos, size, length)
            if path in bounded:
                counts = [r.shape[0] for r in rows]
                checked = _check_actions(f, found_key, torch.cat(rows), bounded[path],
                                         normalized_actions)
                rows = list(torch.split(checked, counts))
            per_leaf[i].extend(rows)
    counts = [x.shape[0] for x in per_leaf[0]]
    num_envs, max_length = len(counts), max(counts)
    if max_length == 0:
        raise OfflineDataError(f"replay checkpoints {[str(f) for f in files]} hold no steps")
    buffer = buffer_ctor(data_spec, num_envs, max_length, name=name, **buffer_kwargs)
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
                         step: Optional[int] = None, overwrite: bool = False) -> Path:
    """Copies the run's replay buffer (newest or at ``step``) to ``out``, atomically.

    Args:
        root_dir: the run's directory (its ``ckpt/`` holds ``replay_buffer-<step>.pt``, written
            with ``TrainerConfig.save_replay_buffer``).
        out: the file to write; ``TrainerConfig.offline_buffer_dir`` and
            ``make_offline_replay_buffer`` take it.
        step: the iteration to export; None for the newest.
        overwrite: replace an existing ``out``; without it an existing file is refused.

    Returns:
        The path written.

    Raises:
        OfflineDataError: (a ``UserError``) if the run has no replay file (naming the setting
            that writes it) or none at ``step`` (listing those it has), if the file is
            unreadable or inconsistent, if ``out`` is a directory or its folder does not
            exist (as ``rlf.bin.play --record`` refuses it: a typo in the path should not
            create folders), or if ``out`` exists and ``overwrite`` is False. Nothing is
            written then.
    """
    out = Path(out)
    if out.is_dir():
        raise OfflineDataError(f"--out {out} is a directory; give a file name, e.g. "
                               f"{out / 'replay.pt'}")
    if not out.parent.is_dir():
        raise OfflineDataError(f"--out {out}: the folder {out.parent} does not exist; create "
                               f"it first")
    if out.exists() and not overwrite:
        raise OfflineDataError(f"--out {out} exists; pass --overwrite to replace it or choose "
                               f"another file")
    ckpt = Path(root_dir) / "ckpt"
    steps = replay_buffer_steps(ckpt)
    if not steps:
        raise OfflineDataError(f"no replay_buffer-*.pt in {ckpt}: train with "
                               f"TrainerConfig.save_replay_buffer = True")
    if step is not None:
        if step not in steps:
            raise OfflineDataError(f"no replay_buffer-{step}.pt in {ckpt}; it has steps {steps}")
        steps = [step]
    path = replay_buffer_path(ckpt, steps[-1])
    load_replay_checkpoint(path)  # validates
    return atomic_save(load_checkpoint_file(path), out)
