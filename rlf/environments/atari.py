"""Atari through ale-py's native vector environment (C++ threads, standard preprocessing)."""

from __future__ import annotations

import os
from typing import Optional

import gin
import gymnasium as gym
import torch
from gymnasium.vector import AutoresetMode

from rlf.environments.vector_environment import VectorEnvironment
from rlf.tensor_specs import TensorSpec

__all__ = ["load_atari", "register_ale", "ATARI_ENTRY_POINT"]

ATARI_ENTRY_POINT = "ale_py.env:AtariEnv"
# The largest seed ALE takes (its seeds are int32).
ALE_MAX_SEED = 2 ** 31 - 1


_ale_registered = False


def register_ale() -> None:
    """Registers ale-py's ids (``ALE/Pong-v5``, ``PongNoFrameskip-v4``, ...) with gymnasium,
    once per process."""
    global _ale_registered
    if not _ale_registered:
        import ale_py
        gym.register_envs(ale_py)
        _ale_registered = True


@gin.configurable
def load_atari(env_name: str,
               num_envs: int,
               seed: Optional[int] = None,
               frame_stack: int = 4,
               frameskip: int = 4,
               img_height: int = 84,
               img_width: int = 84,
               grayscale: bool = True,
               maxpool: bool = True,
               noop_max: int = 30,
               repeat_action_probability: Optional[float] = None,
               full_action_space: Optional[bool] = None,
               max_num_frames_per_episode: Optional[int] = None,
               episodic_life: bool = False,
               reward_clipping: bool = True,
               use_fire_reset: bool = True,
               num_threads: Optional[int] = None) -> VectorEnvironment:
    """Creates ``num_envs`` Atari games as one ``ale_py.vector_env.AtariVectorEnv``.

    The preprocessing is the standard one of Mnih et al. 2015 / Machado et al. 2018, done in
    C++ by ale-py. Observations are ``[B, frame_stack, img_height, img_width]`` uint8
    (``[..., 3]`` appended if not grayscale); actions are ``[B]`` int64 in the game's minimal
    (or full) action set; ``env_info`` holds ``lives`` (``[B]`` int32) and, with
    ``reward_clipping``, ``raw_reward``: the unclipped reward (``[B]`` float32), whose episode
    sums are the game's score (``AverageEpisodeScore``).

    Args:
        env_name: a registered ALE id, e.g. ``"ALE/Pong-v5"`` or ``"PongNoFrameskip-v4"``.
        num_envs: number of games ``B``.
        seed: game ``i`` is seeded with ``seed + i`` at the first reset; ALE's seeds are
            int32, so ``seed + num_envs - 1 <= 2**31 - 1``.
        frame_stack: number of most recent frames stacked per observation (4 or 1).
        frameskip: emulator frames per agent step (the action is repeated).
        img_height, img_width: size the frames are resized to.
        grayscale: convert frames to one luminance channel.
        maxpool: max over the last two frames of each skip (removes flicker).
        noop_max: up to this many no-op actions after each reset.
        repeat_action_probability: sticky actions: at every emulator frame the previous action
            is repeated with this probability. None uses the id's value (0.25 for ``-v5``,
            0.0 for ``-v4``/``NoFrameskip``).
        full_action_space: use all 18 actions; None uses the id's value.
        max_num_frames_per_episode: emulator frames before truncation; None uses the id's
            value (108,000 = 30 minutes).
        episodic_life: end the episode (terminated) on every life loss.
        reward_clipping: clip each step's training reward to ``[-1, 1]`` (Atari rewards are
            integers, so to ``{-1, 0, 1}``), keeping the unclipped one in ``env_info``.
        use_fire_reset: press FIRE after reset in games that need it.
        num_threads: ale-py worker threads; None uses one per available core (at most
            ``num_envs``): more threads than cores only adds contention.

    Raises:
        ValueError: if ``env_name`` is not a registered ALE id, or asks for RAM observations
            (those go through ``load_gym``); if ``frame_stack``, ``frameskip``,
            ``img_height``, ``img_width``, ``max_num_frames_per_episode`` or ``num_threads`` is
            below 1 (the last two may be None), ``noop_max`` is negative,
            ``repeat_action_probability`` is outside ``[0, 1]``, or a game's seed is negative
            or above ``2**31 - 1``.
    """
    if seed is not None and not 0 <= seed <= ALE_MAX_SEED - (num_envs - 1):
        raise ValueError(f"load_atari: seeds {seed}..{seed + num_envs - 1} of {num_envs} "
                         f"games must lie in [0, 2**31 - 1] (ALE's int32 seeds)")
    for name, value, low in (("frame_stack", frame_stack, 1), ("frameskip", frameskip, 1),
                             ("img_height", img_height, 1), ("img_width", img_width, 1),
                             ("noop_max", noop_max, 0),
                             ("max_num_frames_per_episode", max_num_frames_per_episode, 1),
                             ("num_threads", num_threads, 1)):
        if value is not None and value < low:
            raise ValueError(f"load_atari: {name} must be >= {low}, got {value}")
    if repeat_action_probability is not None and not 0.0 <= repeat_action_probability <= 1.0:
        raise ValueError(f"load_atari: repeat_action_probability must be in [0, 1], got "
                         f"{repeat_action_probability}")
    from ale_py.vector_env import AtariVectorEnv

    register_ale()
    spec = gym.spec(env_name)
    if spec.entry_point != ATARI_ENTRY_POINT:
        raise ValueError(f"load_atari: '{env_name}' is not an ALE environment")
    kw = spec.kwargs
    if kw.get("obs_type", "rgb") != "rgb":
        raise ValueError(f"load_atari: '{env_name}' has obs_type={kw['obs_type']!r}; "
                         f"AtariVectorEnv gives image observations only, use load_gym for it")
    if repeat_action_probability is None:
        repeat_action_probability = float(kw.get("repeat_action_probability", 0.25))
    if full_action_space is None:
        full_action_space = bool(kw.get("full_action_space", False))
    if max_num_frames_per_episode is None:
        max_num_frames_per_episode = int(kw.get("max_num_frames_per_episode", 108000))
    if num_threads is None:
        num_threads = min(num_envs, len(os.sched_getaffinity(0)))
    env = AtariVectorEnv(
        kw["game"], num_envs,
        num_threads=num_threads,
        max_num_frames_per_episode=max_num_frames_per_episode,
        repeat_action_probability=repeat_action_probability,
        full_action_space=full_action_space,
        autoreset_mode=AutoresetMode.NEXT_STEP,
        img_height=img_height,
        img_width=img_width,
        grayscale=grayscale,
        stack_num=frame_stack,
        frameskip=frameskip,
        maxpool=maxpool,
        noop_max=noop_max,
        episodic_life=episodic_life,
        reward_clipping=False,  # VectorEnvironment clips, keeping the raw reward
        use_fire_reset=use_fire_reset)
    return VectorEnvironment(env, seed=seed, name=env_name,
                             env_info_spec={"lives": TensorSpec((), torch.int32)},
                             reward_clipping=reward_clipping)
