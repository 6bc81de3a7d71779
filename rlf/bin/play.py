r"""Plays episodes with a trained algorithm and prints their returns.

    python -m rlf.bin.play --root_dir runs/a2c_cartpole [--num_episodes 5] \
        [--record episode.gif|episode.mp4] [--render human] [--checkpoint best|latest|N] \
        [--zero_state] [--debug]

The configuration is ``root_dir/config.gin`` (as written by training); the parameters come
from the newest complete checkpoint, skipping unreadable ones with a warning as training does
(``Checkpointer.newest_complete``; play never renames or deletes a file), or from
``--checkpoint`` (``best``: the best evaluation's policy, ``ckpt/best.pt``; a step; the
old ``--checkpoint_step N``). A mistake (no run directory, a step that does not exist, an
unreadable checkpoint, a bad binding) prints one line and exits with status 2 (the traceback with
``--debug`` or ``RLF_DEBUG=1``); so does a ``--record`` path that cannot be written, checked
before any episode is played; a video that cannot be written in full (a full disk) prints
one line and exits with status 1, leaving nothing at the path. The policy acts with
``predict_step``; with ``--zero_state`` it gets its initial (zero) recurrent state at every
step instead of the state it carried, which shows how much a recurrent policy relies on its
memory. ``--record`` saves the first episode, written atomically, at the environment's own size: the
frames gymnasium renders (``render_mode="rgb_array"``), or for Atari the full RGB screen
(210x160) of a copy of the game stepped alike (``rlf.environments.native_frames``), not the
downscaled observation. Other environments record their observation frames.
``--render human`` shows every episode in a window as it is played, with the frames
``--record`` would take (pygame, the ``play`` extra); without a display (neither ``DISPLAY``
nor ``WAYLAND_DISPLAY``) it is one line and exit status 2.

Each episode's line is printed (and flushed) as the episode ends. An Atari episode lasts
until the id's frame limit (108,000 frames for ``-v5``) if neither side scores, so a greedy
policy stuck in a rally can play for many minutes; cap it with e.g.
``--conf_param load_atari.max_num_frames_per_episode=27000``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any, List

import numpy as np
from absl import flags

from rlf import nest
from rlf.bin.cli import debug_mode, run_main
from rlf.trainers.gin_config import configured_values_refused_as_config_errors, parse_config
from rlf.utils.errors import UserError, one_line
from rlf.utils.video import check_video_path, save_video
from rlf.utils.window import FrameWindow, check_display

FLAGS = flags.FLAGS
flags.DEFINE_string("root_dir", None, "run directory holding config.gin and ckpt/")
flags.DEFINE_integer("num_episodes", 5, "episodes to play", lower_bound=1)
flags.DEFINE_string("checkpoint", None, "latest (the default), best (the best evaluation's "
                                        "policy) or a step")
flags.DEFINE_integer("checkpoint_step", None, "iteration of the checkpoint (newest if unset)",
                     lower_bound=0)
flags.DEFINE_string("record", None, "save the first episode as an animated .gif or .mp4")
flags.DEFINE_integer("fps", 30, "frames per second of the recording and the window",
                     lower_bound=1)
flags.DEFINE_enum("render", "none", ["none", "human"], "human: show the episodes in a window")
flags.DEFINE_integer("seed", 0, "environment seed (ALE takes up to 2**31 - 1)", lower_bound=0,
                     upper_bound=2 ** 31 - 1)
flags.DEFINE_bool("zero_state", False, "act from the initial recurrent state at every step "
                  "(a memory ablation)")
flags.DEFINE_multi_string("conf_param", [], "extra gin bindings")
flags.DEFINE_bool("debug", False, "show the full traceback of errors (also RLF_DEBUG=1)")


def _checkpoint(root: Path):
    """``(step, state, path)`` of ``--checkpoint`` (``best``, a step), ``--checkpoint_step``
    or the newest complete checkpoint in ``root/ckpt``.

    Raises:
        UserError: for no checkpoint, a step that does not exist (listing those that do), or
            an unreadable ``--checkpoint_step``.
    """
    from rlf.trainers.run_dir import run_checkpointer
    from rlf.utils.checkpoint import load_checkpoint_file

    def warn(message):
        print(f"WARNING: {message}", file=sys.stderr, flush=True)

    ckpt = run_checkpointer(root, warn=warn)
    ckpt_dir = ckpt.ckpt_dir
    steps = ckpt.steps()
    if FLAGS.checkpoint is not None and FLAGS.checkpoint_step is not None:
        raise UserError("--checkpoint and --checkpoint_step both name a checkpoint: give one")
    if FLAGS.checkpoint == "best":
        from rlf.trainers.best_checkpoint import existing_best_checkpoint
        best = existing_best_checkpoint(root, "--checkpoint best")
        state = load_checkpoint_file(best)
        return int(state["best"]["iteration"]), state, best
    step, flag = FLAGS.checkpoint_step, "--checkpoint_step"
    if FLAGS.checkpoint not in (None, "latest"):
        try:
            step, flag = int(FLAGS.checkpoint), "--checkpoint"
        except ValueError:
            raise UserError(f"--checkpoint {FLAGS.checkpoint}: give latest, best or a "
                            f"step") from None
    if step is not None:
        if step not in steps:
            raise UserError(f"{flag} {step}: {ckpt_dir} has no ckpt-{step}.pt; the steps it "
                            f"has: {steps or 'none'}")
        return step, load_checkpoint_file(ckpt.path(step)), ckpt.path(step)
    found = ckpt.newest_complete(set_aside_unreadable=False)
    if found is None:
        raise UserError(f"no readable checkpoint in {ckpt_dir}"
                        + (f" (unreadable: steps {steps})" if steps else ""))
    return found[0], found[1], ckpt.path(found[0])


def main(argv) -> int:
    """Plays episodes; returns the exit status (module docstring)."""
    del argv
    try:
        return _play()
    except UserError as e:
        if debug_mode():
            raise
        print(f"error: {one_line(e)}", file=sys.stderr)
        return 2


def _play() -> int:
    root = Path(FLAGS.root_dir or "")
    if not FLAGS.root_dir or not (root / "config.gin").is_file():
        raise UserError(f"--root_dir '{FLAGS.root_dir}' holds no config.gin (a training run's "
                        f"directory is needed)")
    if FLAGS.record is not None:
        try:  # before the episodes, which can take minutes
            check_video_path(FLAGS.record)
        except ValueError as e:
            raise UserError(f"--record: {e}") from None
    human = FLAGS.render == "human"
    if human:
        check_display()
    parse_config(str(root / "config.gin"), FLAGS.conf_param)

    from rlf.algorithms import TrainerConfig
    from rlf.environments import is_atari, load_configured
    from rlf.environments.native_frames import NATIVE_SCREEN, NativeFrames
    from rlf.trainers import evaluate_episodes
    from rlf.trainers.evaluator import episode_frame
    from rlf.trainers.run_dir import model_state

    with configured_values_refused_as_config_errors():  # e.g. a --conf_param's value
        config = TrainerConfig()
    step, checkpoint, checkpoint_path = _checkpoint(root)
    record = FLAGS.record is not None
    frames_wanted = record or human
    kwargs = {}
    env_name = None
    try:
        from gin import config as gin_config
        env_name = gin_config.query_parameter("load.env_name")
    except ValueError:
        pass
    atari = isinstance(env_name, str) and is_atari(env_name)
    if frames_wanted and env_name and not atari:
        kwargs["render_mode"] = "rgb_array"
    if record and not human:
        # Off-screen frames need no display: SDL's dummy driver (pygame renders with SDL)
        # starts without one, and without its "XDG_RUNTIME_DIR is invalid" line on stderr.
        os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
    with configured_values_refused_as_config_errors():
        env: Any = load_configured(num_envs=1, seed=FLAGS.seed, **kwargs)
        if frames_wanted and atari:
            # the same game at the screen's own size, stepped alike (NativeFrames)
            env = NativeFrames(env, load_configured(
                num_envs=1, seed=FLAGS.seed, img_height=NATIVE_SCREEN[0],
                img_width=NATIVE_SCREEN[1], grayscale=False, frame_stack=1, maxpool=False))
        algorithm = config.run.algorithm_ctor(observation_spec=env.observation_spec(),
                                          action_spec=env.action_spec(),
                                          reward_spec=env.reward_spec(), env=None,
                                          config=config)
    algorithm.to(config.run.device)
    state = model_state(checkpoint)
    try:
        algorithm.load_state_dict(state, strict=False)
    except ValueError as e:  # e.g. a --conf_param game with another action set
        raise UserError(f"{checkpoint_path} does not fit the configured algorithm: {e}; play "
                        f"it with the configuration it was trained with (without the "
                        f"--conf_param that changes it)") from None

    if FLAGS.zero_state and not nest.flatten(algorithm.predict_state_spec):
        raise UserError(f"--zero_state resets a recurrent state at every step, and "
                        f"{algorithm.name}'s policy has none (it is feed-forward); remove "
                        f"--zero_state")
    if FLAGS.zero_state:
        predict_step = algorithm.predict_step
        algorithm.predict_step = lambda time_step, state: predict_step(
            time_step, algorithm.get_initial_predict_state(env.batch_size))

    frames: List[np.ndarray] = []
    done = [False]
    window = FrameWindow(f"rlf: {env_name or root}", FLAGS.fps) if human else None

    def on_step(time_step):
        keep = record and not done[0]
        if keep and frames and bool(time_step.is_first()[0]):
            done[0], keep = True, False  # the first episode has ended
        if window is None and not keep:
            return
        frame = episode_frame(env, time_step)
        if frame is None:
            return
        if window is not None:
            window.show(frame)
        if keep:
            frames.append(frame)

    import gymnasium as gym
    try:
        result = evaluate_episodes(
            algorithm, env, FLAGS.num_episodes, device=config.run.device, on_step=on_step,
            on_episode=lambda i, r, n, s: print(
                f"episode {i}: return {r:.2f}" + ("" if s is None else f", score {s:.0f}")
                + f", length {n}", flush=True))
    except gym.error.DependencyNotInstalled as e:
        raise UserError(f"recording needs the environment's renderer: {e} (or pip install -e "
                        f"'.[play]')") from None
    finally:
        if window is not None:
            window.close()
    env.close()
    n = len(result["returns"])
    score = (f", average score {result['AverageEpisodeScore']:.1f}"
             if "AverageEpisodeScore" in result else "")
    print(f"average return {result['AverageReturn']:.2f}{score} over "
          f"{n} episode{'s' * (n != 1)} (checkpoint {checkpoint_path}"
          f"{', state zeroed at every step' if FLAGS.zero_state else ''})")
    if window is not None:
        print(f"showed {window.shown} frames in a window")
    if record:
        try:
            save_video(frames, FLAGS.record, FLAGS.fps)
        except OSError as e:  # a full disk: not the user's input, status 1
            if debug_mode():
                raise
            print(f"error: --record: could not write {FLAGS.record}: {e.strerror or e}; "
                  f"nothing was written there", file=sys.stderr)
            return 1
        except (ValueError, RuntimeError) as e:
            raise UserError(f"--record: {e}") from None
        if isinstance(env, NativeFrames) and env.diverged:
            print(f"warning: the recording's copy of the game ended an episode where the "
                  f"agent's did not: {FLAGS.record} may not show the agent's episode",
                  file=sys.stderr)
        print(f"recorded {len(frames)} frames to {FLAGS.record}")
    return 0


if __name__ == "__main__":
    run_main(main)
