"""``rlf.load_policy``: a trained policy from a run, as a ``Policy`` that predicts actions for
observations (Stable-Baselines3's ``predict``) and exports itself (``torch.export``,
TorchScript, ONNX)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional, Tuple, Union

import gin
import numpy as np
import torch

from rlf import nest
from rlf.data_structures import StepType, TimeStep
from rlf.utils.errors import UserError, one_line_user_errors
from rlf.utils.paths import expand_path

__all__ = ["Policy", "load_policy"]


def _run_and_checkpoint(path: Path, checkpoint: Union[str, int, Path]) -> Tuple[Path, Path]:
    """``(run directory, checkpoint file)`` of ``load_policy``'s arguments.

    Raises:
        UserError: for a path that is neither a run directory nor a checkpoint of one, or a
            checkpoint the run does not have.
    """
    from rlf.trainers.best_checkpoint import existing_best_checkpoint
    from rlf.trainers.run_dir import run_checkpointer
    if path.is_file():  # a run's ckpt/ckpt-<N>.pt
        root = path.parent.parent
        if not (root / "config.gin").is_file():
            raise UserError(f"{path} is not a checkpoint of a run directory (no config.gin in "
                            f"{root}); give the run's directory or its ckpt/ckpt-<N>.pt")
        return root, path
    if not (path / "config.gin").is_file():
        raise UserError(f"{path} holds no config.gin: give a training run's directory (its "
                        f"--root_dir) or one of its checkpoints")
    checkpointer = run_checkpointer(path)
    if isinstance(checkpoint, int) and not isinstance(checkpoint, bool):
        if checkpoint not in checkpointer.steps():
            raise UserError(f"checkpoint={checkpoint}: {checkpointer.ckpt_dir} has no "
                            f"ckpt-{checkpoint}.pt; the steps it has: "
                            f"{checkpointer.steps() or 'none'}")
        return path, checkpointer.path(checkpoint)
    if checkpoint == "best":
        return path, existing_best_checkpoint(path, "checkpoint='best'")
    if checkpoint == "latest":
        found = checkpointer.newest_complete()
        if found is None:
            raise UserError(f"no readable checkpoint in {checkpointer.ckpt_dir}")
        return path, checkpointer.path(found[0])
    if isinstance(checkpoint, (str, Path)) and Path(expand_path(checkpoint)).is_file():
        return path, Path(expand_path(checkpoint))
    raise UserError(f"checkpoint={checkpoint!r}: give 'latest', 'best', a step (an int) or "
                    f"a checkpoint file")


def load_policy(path: Union[str, Path], checkpoint: Union[str, int, Path] = "latest"
                ) -> "Policy":
    """The policy of a training run, as ``rlf.bin.play`` loads it: the run's ``config.gin``
    builds the algorithm, the checkpoint fills it.

    gin's configuration is this call's while it loads: it is cleared before and after.

    Args:
        path: a run directory (``root_dir``) or one of its ``ckpt/ckpt-<N>.pt`` (``~`` and
            ``$VARS`` expanded).
        checkpoint: ``"latest"`` (the newest complete checkpoint), ``"best"`` (the best
            evaluation's policy, ``ckpt/best.pt``), a step (``ckpt-<N>.pt``) or a checkpoint
            file; ignored when ``path`` is a file.

    Returns:
        The ``Policy``, in eval mode on the run's device.

    Raises:
        UserError: for a path or checkpoint that is not there, or a checkpoint that does not
            fit the run's configuration.
    """
    with one_line_user_errors():
        return _load_policy(path, checkpoint)


def _load_policy(path, checkpoint) -> "Policy":
    from rlf.algorithms import TrainerConfig
    from rlf.environments import load_configured
    from rlf.trainers.gin_config import (configured_values_refused_as_config_errors,
                                         parse_config)
    from rlf.trainers.run_dir import model_state
    from rlf.utils.checkpoint import load_checkpoint_file
    root, ckpt = _run_and_checkpoint(Path(expand_path(path, "path")), checkpoint)
    gin.clear_config()
    try:
        parse_config(str(root / "config.gin"))
        with configured_values_refused_as_config_errors():
            config = TrainerConfig()
            if config.run.algorithm_ctor is None:
                raise UserError(f"{root / 'config.gin'} binds no TrainerConfig.algorithm_ctor "
                                f"(a Trainer given a constructor gin does not know): the "
                                f"policy cannot be rebuilt from it; configure the algorithm "
                                f"with gin (TrainerConfig.algorithm_ctor = @MyAlgorithm)")
            env = load_configured(num_envs=1, seed=0)
            try:
                algorithm = config.run.algorithm_ctor(
                    observation_spec=env.observation_spec(), action_spec=env.action_spec(),
                    reward_spec=env.reward_spec(), env=None, config=config)
                preprocessing = TrainingObservations.of(env)
            finally:
                env.close()
    finally:
        gin.clear_config()
    algorithm.to(config.run.device)
    try:
        algorithm.load_state_dict(model_state(load_checkpoint_file(ckpt)), strict=False)
    except ValueError as e:
        raise UserError(f"{ckpt} does not fit the run's configuration "
                        f"({root / 'config.gin'}): {e}") from None
    algorithm.eval()
    return Policy(algorithm, torch.device(config.run.device), ckpt, preprocessing)


class TrainingObservations:
    """What rlf's gymnasium environment does to an observation before the networks see it
    (its observation wrappers, innermost first: flattening a ``Dict``, ``Tuple`` or
    ``Discrete`` observation, masking entries, moving channels first, float32), for raw
    observations given to ``Policy.predict``.

    Args:
        raw_space: the environment's own observation space.
        wrappers: its ``gymnasium.ObservationWrapper`` s, innermost first.
    """

    def __init__(self, raw_space, wrappers):
        self.raw_space, self._wrappers = raw_space, list(wrappers)

    @classmethod
    def of(cls, env) -> Optional["TrainingObservations"]:
        """The preprocessing of rlf's batched environment ``env``, or None where its
        environments are not gymnasium wrappers (Atari's vector environment, whose frames ALE
        preprocesses) or there is none."""
        import gymnasium as gym
        envs = getattr(getattr(env, "gym_env", None), "envs", None)
        if not envs:
            return None
        chain, inner = [], envs[0]
        while isinstance(inner, gym.Wrapper):
            chain.append(inner)
            inner = inner.env
        wrappers = [w for w in reversed(chain) if isinstance(w, gym.ObservationWrapper)]
        return cls(inner.observation_space, wrappers) if wrappers else None

    def is_raw(self, observation: Any) -> Optional[bool]:
        """True for one raw observation, False for a batch of them (a list, or an array with
        the raw shape after its first dim), None for neither."""
        import gymnasium as gym
        discrete = isinstance(self.raw_space, gym.spaces.Discrete)
        if isinstance(observation, (dict, tuple)) or (discrete and np.isscalar(observation)):
            return True
        if isinstance(observation, list) and observation and (
                isinstance(observation[0], (dict, tuple))
                or (discrete and np.isscalar(observation[0]))):
            return False
        shape = getattr(self.raw_space, "shape", None)
        if shape is None or not isinstance(observation, (np.ndarray, torch.Tensor)):
            return None
        if tuple(observation.shape) == tuple(shape):
            return True
        if tuple(observation.shape[1:]) == tuple(shape):
            return False
        return None

    def __call__(self, observation: Any) -> np.ndarray:
        """One raw observation as the networks see it."""
        for wrapper in self._wrappers:
            observation = wrapper.observation(observation)
        return np.asarray(observation)


class Policy:
    """A trained policy: ``predict`` for observations, ``export`` for use outside rlf.

    Args:
        algorithm: the trained ``RLAlgorithm``, in eval mode.
        device: where it runs.
        checkpoint: the file it was loaded from.
        preprocessing: the environment's observation preprocessing, for raw observations
            (``TrainingObservations``), or None.
    """

    def __init__(self, algorithm, device: torch.device, checkpoint: Optional[Path] = None,
                 preprocessing: Optional[TrainingObservations] = None):
        self.algorithm = algorithm
        self.device = device
        self.checkpoint = checkpoint
        self.preprocessing = preprocessing

    @property
    def observation_spec(self):
        """The observation's ``TensorSpec`` (one observation, without a batch dim)."""
        return self.algorithm.observation_spec

    @property
    def action_spec(self):
        """The action's ``BoundedTensorSpec`` (one action, without a batch dim)."""
        return self.algorithm.action_spec

    @property
    def recurrent(self) -> bool:
        """Whether the policy carries a state from step to step (an LSTM)."""
        return bool(nest.flatten(self.algorithm.predict_state_spec))

    def _batch(self, observation: Any) -> Tuple[torch.Tensor, bool]:
        """``([B, ...] tensor, single)`` of one observation or a batch, in the spec's dtype.

        Raises:
            UserError: for a shape that is neither the spec's nor a batch of it.
        """
        spec = self.observation_spec
        shape = tuple(spec.shape)
        prep = self.preprocessing
        if prep is not None and not (isinstance(observation, (np.ndarray, torch.Tensor))
                                     and tuple(observation.shape[-len(shape):]) == shape):
            raw = prep.is_raw(observation)
            if raw is not None:
                observation = (prep(observation) if raw
                               else np.stack([prep(o) for o in observation]))
        obs = torch.as_tensor(np.asarray(observation)).to(spec.dtype)
        if tuple(obs.shape) == shape:
            return obs.unsqueeze(0).to(self.device), True
        if obs.ndim == len(shape) + 1 and tuple(obs.shape[1:]) == shape:
            return obs.to(self.device), False
        raise UserError(f"an observation of shape {list(obs.shape)}: this policy takes "
                        f"{list(shape)} (one) or [B, {', '.join(map(str, shape))}] (a batch), "
                        f"as rlf's environment gives them (flattened Dict observations, "
                        f"stacked Atari frames)")

    def time_step(self, observation: torch.Tensor, first: bool = True) -> TimeStep:
        """The ``TimeStep`` a batch of ``[B, ...]`` observations makes: FIRST (or MID)
        steps, reward 0, discount 1, zero previous actions."""
        b = observation.shape[0]
        alg = self.algorithm
        zeros = nest.map_structure(lambda s: s.zeros((b,)).to(observation.device),
                                   alg.action_spec)
        return TimeStep(
            step_type=torch.full((b,), int(StepType.FIRST if first else StepType.MID),
                                 dtype=torch.int32, device=observation.device),
            reward=alg.reward_spec.zeros((b,)).to(observation.device),
            discount=torch.ones(b, device=observation.device),
            observation=observation, prev_action=zeros,
            env_id=torch.arange(b, dtype=torch.int32, device=observation.device), env_info={})

    @torch.no_grad()
    def predict(self, observation: Any, state: Any = None, deterministic: bool = True
                ) -> Tuple[np.ndarray, Any]:
        """The action for one observation or a batch (Stable-Baselines3's ``predict``).

        Args:
            observation: one observation or a batch (numpy, torch or nested lists), as rlf's
                environment gives it (``spec.shape``, ``[B, *spec.shape]``) or as the
                gymnasium environment does (a ``Dict`` observation, a list of them, unmasked
                or channels-last arrays): the training's preprocessing is applied to those.
            state: the recurrent state ``predict`` returned for the previous step of the same
                episodes; None at an episode's start (and for a feed-forward policy).
            deterministic: the greedy action (``predict_step``); False samples as in
                training (``rollout_step``).

        Returns:
            ``(action, state)``: numpy actions (one, or ``[B, ...]``) and the state for the
            next call (None for a feed-forward policy).

        Raises:
            UserError: for an observation of another shape.
        """
        obs, single = self._batch(observation)
        alg, first = self.algorithm, state is None
        if state is None:
            state = (alg.get_initial_predict_state(obs.shape[0]) if deterministic
                     else alg.get_initial_rollout_state(obs.shape[0]))
            state = nest.map_structure(lambda x: x.to(self.device), state)
        step = (alg.predict_step if deterministic else alg.rollout_step)(
            self.time_step(obs, first=first), state)
        action = nest.map_structure(lambda a: a.detach().cpu().numpy(), step.output)
        if single:
            action = nest.map_structure(lambda a: a[0], action)
        return action, (step.state if self.recurrent else None)

    def export(self, path: Union[str, Path]) -> Path:
        """Writes the greedy policy for use outside rlf: a ``torch.export`` program for
        ``.pt2``, TorchScript for ``.pt``, ONNX for ``.onnx`` (``rlf.api.export``).

        Returns:
            The file written.

        Raises:
            UserError: for another suffix, a recurrent policy, or ONNX without the
                ``export`` extra.
        """
        from rlf.api.export import export_policy
        return export_policy(self, Path(expand_path(path, "path")))
