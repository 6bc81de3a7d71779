"""Evaluation: plays whole episodes with ``predict_step`` on a separate environment."""

from __future__ import annotations

import logging
from typing import Any, Callable, Dict, List, Optional

import gymnasium as gym
import numpy as np
import torch

from rlf import nest
from rlf.data_structures import RAW_REWARD
from rlf.environments.native_frames import NativeFrames
from rlf.utils import summary
from rlf.utils.extras import MissingExtraError
from rlf.utils.common import reset_state_if_necessary

__all__ = ["EpisodeFrames", "episode_frame", "evaluate_episodes", "EvalResult"]

logger = logging.getLogger(__name__)

# Batched steps without an episode ending after which evaluation warns that it may never end
# (an Atari episode is at most 27,000 agent steps).
STEPS_WITHOUT_AN_EPISODE_WARNING = 100_000


class EvalResult(dict):
    """``{"AverageReturn", "AverageEpisodeLength", "returns", "lengths"}`` of an evaluation,
    plus ``"AverageEpisodeScore"`` and ``"scores"`` (the game's own scores) where the
    environment clips its rewards and reports the raw ones (Atari)."""


def episode_frame(env, time_step) -> Optional[np.ndarray]:
    """The frame of environment 0 at ``time_step`` (``[B]``), as ``[H, W]`` or ``[H, W, 3]``
    uint8: ``env.frame()`` where ``env`` is a ``NativeFrames`` (Atari's native screen);
    what gymnasium renders where the environment was made with ``render_mode="rgb_array"``;
    else the newest frame of uint8 image observations (Atari's 84x84); None for other
    observations.

    Raises:
        gymnasium.error.DependencyNotInstalled: where rendering needs a package that is
            missing (``pip install -e '.[play]'``).
    """
    if isinstance(env, NativeFrames):
        frame = env.frame()
    else:
        gym_env = getattr(env, "gym_env", None)
        if gym_env is not None and getattr(gym_env, "render_mode", None) == "rgb_array":
            frame = gym_env.render()
            frame = frame[0] if isinstance(frame, (list, tuple)) else frame
        else:
            observation = time_step.observation
            if not isinstance(observation, torch.Tensor) or observation.dtype != torch.uint8:
                return None
            frame = observation[0].numpy()
            frame = frame[-1] if frame.ndim == 3 else frame  # the newest stacked frame
            if frame.ndim != 2:
                return None
    return None if frame is None else np.ascontiguousarray(frame).astype(np.uint8)


class EpisodeFrames:
    """The frames of the first episode of environment 0 of a batched environment, as an
    evaluation plays it (``on_step``): ``episode_frame``'s.

    Args:
        env: the batched environment.
    """

    def __init__(self, env):
        self._env = env
        self._ended = False
        self.frames: List[np.ndarray] = []

    def add(self, time_step) -> None:
        """Takes the frame of ``time_step`` (``[B]``), until the first episode ends.

        Raises:
            MissingExtraError: where rendering needs a package that is missing.
        """
        if self._ended:
            return
        if self.frames and bool(time_step.is_first()[0]):
            self._ended = True
            return
        try:
            frame = episode_frame(self._env, time_step)
        except gym.error.DependencyNotInstalled as e:
            raise MissingExtraError(f"TrainerConfig.eval_video_interval: {e} (or pip "
                                    f"install -e '.[play]')") from None
        if frame is not None:
            self.frames.append(frame)


@torch.no_grad()
def evaluate_episodes(algorithm, env, num_episodes: int, device: str | torch.device = "cpu",
                      on_step: Optional[Callable[[Any], None]] = None,
                      max_steps: Optional[int] = None,
                      on_episode: Optional[
                          Callable[[int, float, int, Optional[float]], None]] = None
                      ) -> EvalResult:
    """Plays ``num_episodes`` episodes with ``algorithm.predict_step`` (no gradients, eval mode).

    Environment ``b`` of the batched ``env`` (reset first) contributes its first
    ``(num_episodes + b) // B`` episodes, fixed in advance as in Stable-Baselines3's
    ``evaluate_policy``: counting the first ``num_episodes`` to end over all environments
    would favour short episodes. They are listed in the order they end. The return of an
    episode is the sum of its (possibly vector) rewards after FIRST; its length counts its
    non-FIRST steps (as ``AverageEpisodeLengthMetric``).

    Args:
        algorithm: has ``predict_step(time_step, state)`` and
            ``get_initial_predict_state(batch_size)``.
        env: a batched environment.
        num_episodes: episodes to finish (>= 1).
        device: where ``predict_step`` runs.
        on_step: called with every ``[B]`` time step (e.g. to record frames).
        max_steps: stop after this many batched steps even if fewer episodes ended. Without
            it, evaluation logs a warning after ``STEPS_WITHOUT_AN_EPISODE_WARNING`` steps in
            which no episode ended.
        on_episode: called as ``on_episode(index, return, length, score)`` when each episode
            ends (e.g. to print it at once: an Atari episode can take minutes); ``score`` is
            the sum of ``env_info["raw_reward"]``, or None where there is none.

    Returns:
        ``EvalResult`` with the mean return and length and the per-episode lists.

    Raises:
        ValueError: if ``num_episodes < 1``.
    """
    if num_episodes < 1:
        raise ValueError(f"evaluate_episodes: num_episodes must be >= 1, got {num_episodes}")
    was_training = algorithm.training
    algorithm.eval()
    batch_size = env.batch_size
    time_step = env.reset()
    state = algorithm.get_initial_predict_state(batch_size)
    initial_state = algorithm.get_initial_predict_state(batch_size)
    episode_return = np.zeros(batch_size)
    episode_length = np.zeros(batch_size, dtype=np.int64)
    episode_score = np.zeros(batch_size)
    scored = RAW_REWARD in time_step.env_info
    scores: List[float] = []
    returns: List[float] = []
    lengths: List[int] = []
    targets = (num_episodes + np.arange(batch_size)) // batch_size  # episodes per environment
    counted = np.zeros(batch_size, dtype=np.int64)
    steps = 0
    last_end = 0  # the step at which an episode last ended
    # Evaluation draws its own random numbers: training's stream (and so a resumed run's
    # reproducibility) does not depend on whether or how long evaluation ran.
    with torch.random.fork_rng(devices=[]):
        try:
            while len(returns) < num_episodes and (max_steps is None or steps < max_steps):
                if on_step is not None:
                    on_step(time_step)
                first = time_step.is_first().numpy()
                reward = time_step.reward.reshape(batch_size, -1).sum(-1).numpy()
                episode_return = np.where(first, 0.0, episode_return + reward)
                episode_length = np.where(first, 0, episode_length + 1)
                if scored:
                    raw = time_step.env_info[RAW_REWARD].numpy()
                    episode_score = np.where(first, 0.0, episode_score + raw)
                ended = np.flatnonzero(time_step.is_last().numpy())
                if ended.size:
                    last_end = steps
                elif steps - last_end == STEPS_WITHOUT_AN_EPISODE_WARNING:
                    logger.warning(
                        "evaluation on %s: no episode has ended in %d steps; an environment "
                        "that never ends its episodes keeps evaluation running forever: give "
                        "it a time limit (load.max_episode_steps) or set "
                        "TrainerConfig.evaluate = False", getattr(env, "name", "the environment"),
                        steps - last_end)
                for b in ended:
                    if counted[b] == targets[b]:
                        continue
                    counted[b] += 1
                    returns.append(float(episode_return[b]))
                    lengths.append(int(episode_length[b]))
                    if scored:
                        scores.append(float(episode_score[b]))
                    if on_episode is not None:
                        on_episode(len(returns) - 1, returns[-1], lengths[-1],
                                   scores[-1] if scored else None)
                inputs = nest.utils.convert_device(time_step, device)
                state = reset_state_if_necessary(state, initial_state, inputs.is_first())
                step = algorithm.predict_step(inputs, state)
                state = step.state
                time_step = env.step(step.output)
                steps += 1
        finally:
            algorithm.train(was_training)
    result = EvalResult(AverageReturn=float(np.mean(returns)) if returns else float("nan"),
                        AverageEpisodeLength=float(np.mean(lengths)) if lengths else float("nan"),
                        returns=returns, lengths=lengths)
    if scored:
        result.update(AverageEpisodeScore=float(np.mean(scores)) if scores else float("nan"),
                      scores=scores)
    return result


def write_eval_summaries(result: Dict[str, Any], env_steps: int,
                         num_updates: Optional[int] = None) -> None:
    """Writes ``Eval/AverageReturn``, ``Eval/AverageEpisodeLength`` and (where there is one)
    ``Eval/AverageEpisodeScore`` whatever the summary interval, against the global counter
    (iterations) and against ``env_steps`` (``Eval_vs_EnvironmentSteps/...``) or, for a
    purely offline run, which takes no environment step, against ``num_updates``
    (``Eval_vs_Updates/...``).

    Args:
        result: from ``evaluate_episodes``.
        env_steps: the run's environment steps.
        num_updates: the run's gradient updates, given for a purely offline run; None
            otherwise.
    """
    tag, step = (("Eval_vs_EnvironmentSteps", env_steps) if num_updates is None
                 else ("Eval_vs_Updates", num_updates))
    with summary.record_if(lambda: True):
        for key in ("AverageReturn", "AverageEpisodeLength", "AverageEpisodeScore"):
            if key not in result:
                continue
            summary.scalar(f"Eval/{key}", result[key])
            summary.scalar(f"{tag}/{key}", result[key], step=step)
