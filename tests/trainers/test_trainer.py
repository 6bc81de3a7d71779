"""Trainer: exact resume, replay checkpoints, TensorBoard events, corrupt and mismatched
checkpoints, and the command line (SIGINT, bad input)."""

import functools
import hashlib
import io
import re
import shutil
import signal
import subprocess
import sys
import time
import types
from pathlib import Path

import gin
import pytest
import torch
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from examples.a2c import A2C
from rlf.algorithms import ExperienceSource, NotCheckpointed, TrainerConfig
from rlf.replay import ReplayBuffer
from rlf.tensor_specs import spec_from_tensors
from rlf.trainers import CheckpointMismatchError, Trainer
from rlf.trainers.run_dir import model_state
from rlf.utils.checkpoint import load_checkpoint_file
from rlf.utils.errors import UserError, one_line
from rlf.utils.tensorboard_reader import read_scalar_tags, read_scalars
from tests.algorithms._learners import learner_of

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def cartpole_gin():
    gin.parse_config("load.env_name = 'CartPole-v1'\nload.num_envs = 4")
    yield
    gin.clear_config()


def _config(num_iterations, on_policy=True, hidden=(16,), lr_scheduler=None, **kw):
    ctor = functools.partial(A2C, hidden=hidden, is_on_policy=on_policy,
                             optimizer=functools.partial(torch.optim.Adam, lr=1e-3),
                             lr_scheduler=lr_scheduler)
    extra = {} if on_policy else dict(whole_replay_buffer_training=True,
                                      clear_replay_buffer=True, save_replay_buffer=True)
    extra = dict(checkpoint_interval=100, **extra)
    extra.update(kw)
    extra.setdefault("summary_interval", 1)
    return TrainerConfig(algorithm_ctor=ctor, random_seed=3, unroll_length=8,
                         num_iterations=num_iterations, **extra)


def _scalars(root: Path, tag: str) -> dict:
    """``{step: value}`` of ``tag`` as TensorBoard shows the run's events."""
    steps, values, _ = read_scalars(root / "train", tag)
    return dict(zip(steps, values))


@pytest.mark.parametrize("on_policy,epochs", [(True, False), (False, False), (True, True)],
                         ids=["on_policy", "off_policy_replay", "on_policy_epochs"])
def test_resume_reproduces_losses_exactly(tmp_path, on_policy, epochs):
    # Epochs (PPO's loop) also train on the step carried over from the previous unroll.
    kw = dict(num_updates_per_train_iter=2, mini_batch_size=2) if epochs else {}
    Trainer(_config(12, on_policy, **kw), tmp_path / "a", progress=False).train()
    Trainer(_config(6, on_policy, **kw), tmp_path / "b", progress=False).train()
    if not on_policy:  # the replay buffer went to its own file, in ALF's layout
        replay = load_checkpoint_file(tmp_path / "b" / "ckpt" / "replay_buffer-6.pt")
        keys = replay["algorithm"].keys()
        assert "_replay_buffer.time_step|reward" in keys
        assert replay["algorithm"]["_replay_buffer.time_step|reward"].shape == (4, 9)
        model = load_checkpoint_file(tmp_path / "b" / "ckpt" / "ckpt-6.pt")
        assert not any("replay_buffer" in k for k in model["algorithm"])
    if epochs:  # the carried step, copied out of its unroll's storage
        carried = load_checkpoint_file(tmp_path / "b" / "ckpt" / "ckpt-6.pt")[
            "algorithm"]["_extra_state"]["last_unroll_step"]
        assert carried and all(x.shape[:2] == (1, 4) for x in carried)
        assert all(x.untyped_storage().nbytes() == x.numel() * x.element_size()
                   for x in carried)
    result = Trainer(_config(12, on_policy, **kw), tmp_path / "b", progress=False).train()
    assert result["iterations"] == 12
    a, b = _scalars(tmp_path / "a", "loss/A2C"), _scalars(tmp_path / "b", "loss/A2C")
    first_trained = 1 if on_policy else 2  # off-policy trains from the 2nd iteration on
    assert sorted(a) == list(range(first_trained, 13))
    assert [b[s] for s in range(7, 13)] == [a[s] for s in range(7, 13)]
    assert a[7] != a[8]  # the losses do change: the comparison is not vacuous


def test_resume_continues_the_lr_schedule(tmp_path):
    # linear decay from 1e-3 to 0 over 12 updates (one per on-policy iteration)
    decay = functools.partial(torch.optim.lr_scheduler.LinearLR, start_factor=1.0,
                              end_factor=0.0, total_iters=12)
    Trainer(_config(12, lr_scheduler=decay), tmp_path / "a", progress=False).train()
    Trainer(_config(6, lr_scheduler=decay), tmp_path / "b", progress=False).train()
    Trainer(_config(12, lr_scheduler=decay), tmp_path / "b", progress=False).train()
    lr_a = _scalars(tmp_path / "a", "learning_rate/A2C/0")
    lr_b = _scalars(tmp_path / "b", "learning_rate/A2C/0")
    # iteration i's update used 1e-3 * (1 - (i - 1) / 12)
    assert [lr_a[i] for i in (1, 7, 12)] == pytest.approx([1e-3 * (1 - (i - 1) / 12)
                                                          for i in (1, 7, 12)], rel=1e-5)
    assert lr_b == lr_a
    a, b = _scalars(tmp_path / "a", "loss/A2C"), _scalars(tmp_path / "b", "loss/A2C")
    assert [b[s] for s in range(7, 13)] == [a[s] for s in range(7, 13)]


def test_config_gin_records_the_lazily_built_optimizer_and_schedule(tmp_path):
    # Off-policy whole-buffer training makes its first update (which builds the optimizer
    # and its schedule) in iteration 2, after config.gin was first written.
    gin.parse_config("""
A2C.hidden = (16,)
A2C.is_on_policy = False
A2C.optimizer = @torch.optim.Adam
torch.optim.Adam.lr = 0.00123
A2C.lr_scheduler = @torch.optim.lr_scheduler.StepLR
torch.optim.lr_scheduler.StepLR.step_size = 77
""")
    config = TrainerConfig(algorithm_ctor=A2C, unroll_length=8, num_iterations=3,
                           whole_replay_buffer_training=True, clear_replay_buffer=True)
    Trainer(config, tmp_path, progress=False).train()
    text = (tmp_path / "config.gin").read_text()
    assert "Adam.lr = 0.00123" in text  # gin prints the shortest unique name
    assert "StepLR.step_size = 77" in text


def test_close_twice_is_harmless_and_build_after_close_raises(tmp_path):
    trainer = Trainer(_config(1), tmp_path, progress=False)
    assert trainer.build() is trainer.build()
    trainer.close()
    trainer.close()
    with pytest.raises(RuntimeError, match="is closed"):
        trainer.build()


def test_a_run_directory_trains_in_one_process_at_a_time(tmp_path):
    # Before, a second process (the same command started twice) resumed from the same
    # checkpoint and wrote checkpoints and summaries beside the first one's.
    from rlf.trainers.run_dir import RunDirectoryError
    first = Trainer(_config(1), tmp_path / "run", progress=False)
    first.build()  # a new run: its directory is made and locked once all is built
    script = ("import sys; from pathlib import Path; "
              "from rlf.trainers.run_dir import lock_run_directory; "
              "lock_run_directory(Path(sys.argv[1]))")
    other = subprocess.run([sys.executable, "-c", script, str(tmp_path / "run")], cwd=REPO,
                           capture_output=True, text=True, timeout=60)
    assert other.returncode == 1 and "is in use by another training process" in other.stderr
    second = Trainer(_config(1), tmp_path / "run", progress=False)
    with pytest.raises(RunDirectoryError, match=f"root_dir {tmp_path / 'run'} is in use by "
                                                f"another training process"):
        second.build()
    first.close()  # releases it
    third = Trainer(_config(1), tmp_path / "run", progress=False)
    third.build()
    third.close()


def test_a_file_system_without_flock_runs_unlocked_with_a_warning(tmp_path, monkeypatch,
                                                                   caplog):
    import errno
    import fcntl
    import os
    from rlf.trainers.run_dir import lock_run_directory

    def no_locks(fd, operation):
        raise OSError(errno.ENOLCK, "No locks available")

    monkeypatch.setattr(fcntl, "flock", no_locks)
    os.close(lock_run_directory(tmp_path / "run"))
    assert "cannot lock" in caplog.text and "No locks available" in caplog.text


def test_building_a_trainer_leaves_the_process_settings_alone(tmp_path):
    # Process tuning is the launchers' (rlf.runtime.configure_process), never a constructor's.
    denormal = torch.tensor([0x00400000], dtype=torch.int32).view(torch.float32)
    threads = torch.get_num_threads()
    torch.set_flush_denormal(False)
    trainer = Trainer(_config(1, flush_denormal=True, torch_num_threads=threads + 1),
                      tmp_path, progress=False)
    trainer.build()
    trainer.close()
    assert float(denormal * 1.0) != 0.0 and torch.get_num_threads() == threads


def test_a_run_that_ends_between_evaluations_evaluates_its_final_policy(tmp_path):
    config = dict(evaluate=True, eval_interval=3, num_eval_episodes=1)
    Trainer(_config(7, **config), tmp_path, progress=False).train()
    assert sorted(_scalars(tmp_path, "Eval/AverageReturn")) == [3, 6, 7]
    Trainer(_config(9, **config), tmp_path, progress=False).train()  # resumed: ends on one
    assert sorted(_scalars(tmp_path, "Eval/AverageReturn")) == [3, 6, 7, 9]


def test_a_run_in_steps_writes_what_one_train_call_writes(tmp_path):
    # start / run(k) / save / finish, as an experiment drives a trial step by step
    config = dict(evaluate=True, eval_interval=3, num_eval_episodes=1)
    whole = Trainer(_config(7, **config), tmp_path / "whole", progress=False).train()
    trainer = Trainer(_config(7, **config), tmp_path / "steps", progress=False)
    with pytest.raises(RuntimeError, match=r"call start\(\) first"):
        trainer.run(1)
    assert trainer.start() is None
    assert trainer.run(3)["iterations"] == 3 and not trainer.done
    assert trainer.save().name == "ckpt-3.pt"
    assert trainer.run(3)["iterations"] == 6
    assert trainer.run(3)["iterations"] == 7 and trainer.done  # the budget bounds a step
    result = trainer.finish()
    assert result["iterations"] == whole["iterations"] == 7
    assert result["env_steps"] == whole["env_steps"]
    for tag in ("loss/A2C", "Metrics/AverageReturn", "Metrics/EnvironmentSteps",
                "Eval/AverageReturn"):
        assert _scalars(tmp_path / "steps", tag) == _scalars(tmp_path / "whole", tag), tag
    assert len(_scalars(tmp_path / "whole", "loss/A2C")) == 7
    assert sorted(p.name for p in (tmp_path / "steps" / "ckpt").glob("ckpt-*.pt")) == [
        "ckpt-3.pt", "ckpt-7.pt"]
    with pytest.raises(RuntimeError, match="not after finish"):
        trainer.run(1)


def test_tensorboard_events_hold_metric_tags(tmp_path):
    Trainer(_config(30, evaluate=True, eval_interval=15, num_eval_episodes=2), tmp_path,
            progress=False).train()
    files = list((tmp_path / "train").glob("events.out.tfevents.*"))
    acc = EventAccumulator(str(files[0]))
    acc.Reload()
    tags = set(acc.Tags()["scalars"])
    assert "Metrics/EnvironmentSteps" in tags
    for name in ("NumberOfEpisodes", "AverageReturn",
                 "AverageEpisodeLength", "AverageDiscountedReturn", "AverageReward",
                 "EpisodicStartAverageDiscountedReturn"):
        assert f"Metrics/{name}" in tags and f"Metrics_vs_EnvironmentSteps/{name}" in tags
    for tag in ("loss/A2C", "loss/A2C/pg_loss", "loss/A2C/value_loss", "loss/A2C/entropy",
                "learning_rate/A2C/0", "global_grad_norm/A2C/0", "time/env_step",
                "time/policy", "time/train", "rollout_reward/mean", "rollout_action/mean",
                "Eval/AverageReturn", "Eval_vs_EnvironmentSteps/AverageReturn"):
        assert tag in tags, tag
    steps = [e.step for e in acc.Scalars("Metrics_vs_EnvironmentSteps/AverageReturn")]
    # env steps: 4 envs x 8 steps x 30 iterations, less the FIRST steps (not counted)
    assert steps == sorted(steps) and 800 < steps[-1] < 4 * 8 * 30
    # the new-episode summaries count every episode once (summaries every iteration here)
    new = [e.value for e in acc.Scalars("Metrics_new_episodes/NumberOfEpisodes")]
    total = acc.Scalars("Metrics/NumberOfEpisodes")[-1].value
    assert len(new) > 5 and sum(new) == total
    assert "Metrics_new_episodes_vs_EnvironmentSteps/AverageReturn" in tags
    assert (tmp_path / "config.gin").read_text().count("A2C") > 0


def test_truncated_checkpoint_is_skipped_and_mismatch_is_refused(tmp_path, capsys):
    Trainer(_config(4, checkpoint_interval=2), tmp_path, progress=False).train()
    newest = tmp_path / "ckpt" / "ckpt-4.pt"
    newest.write_bytes(newest.read_bytes()[:1000])  # a crash mid-copy, say
    result = Trainer(_config(6, checkpoint_interval=2), tmp_path, progress=False).train()
    captured = capsys.readouterr()
    assert "skipping checkpoint 4" in captured.err and "ckpt-4.pt.corrupt" in captured.err
    assert "Resuming from iteration 2" in captured.out
    assert result["iterations"] == 6
    assert (tmp_path / "ckpt" / "ckpt-4.pt.corrupt").stat().st_size == 1000  # kept aside

    ckpt = tmp_path / "ckpt" / "ckpt-6.pt"
    digest = hashlib.sha256(ckpt.read_bytes()).hexdigest()
    with pytest.raises(CheckpointMismatchError, match=r"_actor\.0\.weight' expected \(32, 4\)"):
        Trainer(_config(8, hidden=(32,)), tmp_path, progress=False).train()
    assert hashlib.sha256(ckpt.read_bytes()).hexdigest() == digest


def test_a_checkpoint_that_does_not_fit_is_refused_before_the_unroller_is_made(tmp_path,
                                                                            monkeypatch):
    # The restore is part of the build (build_training's restore=), before the unroller
    # factory runs: a run that cannot resume starts no actor and makes no evaluation
    # environment.
    made = []
    make_unroller = Trainer._make_unroller

    def recorded(trainer):
        made.append(trainer.algorithm.get_env_steps())
        return make_unroller(trainer)

    monkeypatch.setattr(Trainer, "_make_unroller", recorded)
    Trainer(_config(2), tmp_path, progress=False).train()
    assert made == [0]
    with pytest.raises(CheckpointMismatchError, match=r"_actor\.0\.weight' expected \(32, 4\)"):
        Trainer(_config(4, hidden=(32,)), tmp_path, progress=False).build()
    assert len(made) == 1
    resumed = Trainer(_config(4), tmp_path, progress=False)
    try:
        resumed.build()
        assert made[0] == 0 < made[1]  # made once the checkpoint was restored
    finally:
        resumed.close()


def test_summaries_past_the_restored_state_are_hidden_as_tensorboard_hides_them(tmp_path):
    # A run killed after its checkpoint at iteration 4 had written summaries up to iteration 8
    # (ckpt-8 removed: the kill came before it). The resumed run stops at 6: without
    # TensorBoard's restart marker, the killed run's summaries of iterations 7 and 8 would
    # still be read as the run's (and an async run's, at other env steps, beside the new
    # ones). A run that finds no checkpoint at all hides the old run entirely.
    tag = "Metrics_vs_EnvironmentSteps/NumberOfEpisodes"
    Trainer(_config(8, checkpoint_interval=4), tmp_path, progress=False).train()
    steps_8 = read_scalars(tmp_path / "train", tag)[0]
    assert len(steps_8) == 8
    (tmp_path / "ckpt" / "ckpt-8.pt").unlink()
    time.sleep(1.1)  # event file names carry the second: the resumed run's sorts after
    Trainer(_config(6, checkpoint_interval=4), tmp_path, progress=False).train()
    steps = read_scalars(tmp_path / "train", tag)[0]
    assert steps == steps_8[:6]
    acc = EventAccumulator(str(tmp_path / "train"), size_guidance={"scalars": 0})
    acc.Reload()  # TensorBoard's own view of the directory agrees
    assert sorted({e.step for e in acc.Scalars(tag)}) == steps
    assert len(list((tmp_path / "train").glob("events.out.tfevents.*"))) == 2  # none deleted

    for ckpt in (tmp_path / "ckpt").glob("ckpt-*.pt"):
        ckpt.unlink()
    time.sleep(1.1)
    Trainer(_config(2, checkpoint_interval=4), tmp_path, progress=False).train()
    assert read_scalars(tmp_path / "train", tag)[0] == steps_8[:2]


def _train_cli(*args, **kw):
    return subprocess.run([sys.executable, "-m", "rlf.bin.train", *args], cwd=REPO,
                          capture_output=True, text=True, timeout=120, **kw)


def test_cli_bad_input_exits_2_with_one_line(tmp_path):
    conf = "examples/a2c_cartpole.gin"
    cases = [(["--conf", "nope.gin"], "conf file 'nope.gin' does not exist"),
             (["--conf", conf, "--conf_param", "TrainerConfig.num_iteration=1"],
              "closest: num_iterations"),
             (["--conf", conf, "--gin_param", "TrainerConfg.num_iterations=1"],
              "closest: TrainerConfig"),
             (["--conf", conf, "--conf_param", "TrainerConfig.num_iterations=1 2"],
              "malformed")]
    for args, expected in cases:
        r = _train_cli(*args, "--root_dir", str(tmp_path))
        assert r.returncode == 2, r.stderr
        lines = [line for line in r.stderr.splitlines() if line.strip()]
        assert len(lines) == 1 and expected in lines[0], r.stderr


def _signal_a_cartpole_run(root, signum, *params, times=1, gap=1.0):
    """Starts the A2C example's training, sends ``signum`` 2 s after its config.gin appears
    (``times`` times, ``gap`` s apart) and returns ``(exit status, output)``."""
    args = [a for p in ("TrainerConfig.num_iterations=1000000", *params)
            for a in ("--conf_param", p)]
    proc = subprocess.Popen(
        [sys.executable, "-m", "rlf.bin.train", "--conf", "examples/a2c_cartpole.gin",
         "--root_dir", str(root), "--noprogress", *args],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.time() + 90
        while not (root / "config.gin").exists() and time.time() < deadline:
            time.sleep(0.2)
        for _ in range(times):
            time.sleep(2.0 if _ == 0 else gap)
            proc.send_signal(signum)
        # (an iteration under a loaded machine's scheduling can take a minute)
        out, _ = proc.communicate(timeout=240)
    finally:
        proc.kill()
    return proc.returncode, out


def test_one_signal_delivered_twice_at_once_stops_the_run_with_a_checkpoint(tmp_path):
    # `timeout` (and schedulers) send SIGTERM to the run and to its process group: two
    # signals within milliseconds, which aborted the run as a second Ctrl-C, saving nothing.
    # Iterations of 40,000 steps (seconds each): both signals come within one iteration.
    returncode, out = _signal_a_cartpole_run(tmp_path, signal.SIGTERM,
                                             "TrainerConfig.unroll_length=5000", times=2,
                                             gap=0.2)
    assert returncode == 0, out
    assert "stopped by signal; checkpoint written" in out and "aborted" not in out, out
    assert list((tmp_path / "ckpt").glob("ckpt-*.pt"))


def test_sigterm_during_evaluation_stops_it_and_writes_the_checkpoint(tmp_path):
    # Evaluation ran to its end first: for Atari, minutes, past a scheduler's grace period.
    # The signal comes in the first evaluation, which would last hours.
    returncode, out = _signal_a_cartpole_run(
        tmp_path, signal.SIGTERM, "TrainerConfig.evaluate=True",
        "TrainerConfig.eval_interval=1", "TrainerConfig.num_eval_episodes=10000000")
    assert returncode == 0, out
    assert "iteration 1: evaluation stopped by the signal (nothing written)" in out, out
    assert "finished: 1 iterations" in out and "stopped by signal" in out, out
    assert "last eval" not in out
    assert sorted(p.name for p in (tmp_path / "ckpt").iterdir()) == ["ckpt-1.pt"]


def test_a_second_sigint_aborts_in_one_line(tmp_path):
    # It was KeyboardInterrupt's traceback. Iterations of 100,000 steps: both signals come
    # within the first.
    returncode, out = _signal_a_cartpole_run(tmp_path, signal.SIGINT,
                                             "TrainerConfig.evaluate=False",
                                             "TrainerConfig.unroll_length=100000", times=2)
    assert returncode == 130, out
    assert "Traceback" not in out and out.strip().splitlines()[-1] == (
        "aborted: nothing was saved after the last checkpoint"), out
    assert not (tmp_path / "ckpt").exists()


def test_sigint_writes_checkpoint_and_exits_0(tmp_path):
    # The signal comes after some iterations.
    returncode, out = _signal_a_cartpole_run(tmp_path, signal.SIGINT,
                                             "TrainerConfig.evaluate=False")
    assert returncode == 0, out
    assert "stopped by signal" in out
    # The checkpoint of the iteration the signal ended (beside any periodic one: the conf
    # writes one every 250 iterations, which a fast machine passes within the 2 s).
    stopped_at = int(re.search(r"finished: (\d+) iterations", out).group(1))
    ckpts = sorted((tmp_path / "ckpt").glob("ckpt-*.pt"), key=lambda p: int(p.stem[5:]))
    assert ckpts and ckpts[-1].name == f"ckpt-{stopped_at}.pt", (out, ckpts)
    state = load_checkpoint_file(ckpts[-1])
    assert state["trainer"]["iter_num"] == stopped_at > 0
    assert "_actor.0.weight" in state["algorithm"]
    # What play loads: the model without the metrics', optimizers' and schedules' state.
    model = model_state(state)
    assert "_actor.0.weight" in model and set(model) < set(state["algorithm"])
    assert not [k for k in model if k.startswith("_metrics.")
                or k in ("_optimizers", "_lr_schedulers")]
    assert any(k.startswith("_metrics.") for k in state["algorithm"])
    play = subprocess.run(
        [sys.executable, "-m", "rlf.bin.play", "--root_dir", str(tmp_path), "--num_episodes",
         "2"], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert play.returncode == 0, play.stderr
    assert "episode 1: return" in play.stdout and "average return" in play.stdout


def test_play_zero_state_resets_a_recurrent_policy_at_every_step(tmp_path):
    train = subprocess.run(
        [sys.executable, "-m", "rlf.bin.train", "--conf", "confs/ppo_cartpole_novel.gin",
         "--root_dir", str(tmp_path), "--noprogress", "--conf_param",
         "TrainerConfig.num_env_steps=512", "--conf_param", "TrainerConfig.evaluate=False"],
        cwd=REPO, capture_output=True, text=True, timeout=300)
    assert train.returncode == 0, train.stderr
    plays = [subprocess.run(
        [sys.executable, "-m", "rlf.bin.play", "--root_dir", str(tmp_path), "--num_episodes",
         "3", *flag], cwd=REPO, capture_output=True, text=True, timeout=120)
        for flag in ([], ["--zero_state"])]
    assert [p.returncode for p in plays] == [0, 0], plays[1].stderr
    assert "state zeroed" not in plays[0].stdout
    assert plays[1].stdout.strip().splitlines()[-1].endswith(
        ", state zeroed at every step)"), plays[1].stdout


def test_play_writes_gif_and_mp4(tmp_path):
    pytest.importorskip("PIL")
    import numpy as np
    from rlf.utils.video import save_video
    frames = [np.full((8, 10, 3), i * 20, np.uint8) for i in range(5)]
    save_video(frames, str(tmp_path / "e.gif"))
    save_video([f[..., 0] for f in frames], str(tmp_path / "e.mp4"))
    from PIL import Image
    with Image.open(tmp_path / "e.gif") as im:
        assert im.n_frames == 5
    assert (tmp_path / "e.mp4").stat().st_size > 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["e.gif", "e.mp4"]  # no temp file
    with pytest.raises(ValueError, match="use a .gif or .mp4"):
        save_video(frames, str(tmp_path / "e.avi"))
    with pytest.raises(ValueError, match="the folder .* does not exist"):
        save_video(frames, str(tmp_path / "no" / "e.gif"))
    with pytest.raises(ValueError, match="no frames"):
        save_video([], str(tmp_path / "f.gif"))
    # A full disk (a file-size limit here): OpenCV wrote a truncated MP4 without a word.
    from tests.faults._cli import file_size_limit
    many = [np.random.default_rng(i).integers(0, 255, (64, 64, 3), np.uint8) for i in range(50)]
    for name in ("e.gif", "e.mp4"):
        before = (tmp_path / name).read_bytes()
        with file_size_limit(4096), pytest.raises(OSError):
            save_video(many, str(tmp_path / name))
        assert (tmp_path / name).read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["e.gif", "e.mp4"]


def test_nan_loss_stops_naming_term_iteration_and_last_checkpoint(tmp_path):
    from torch import nn

    from rlf.algorithms import NonFiniteLossError, RLAlgorithm
    from rlf.data_structures import AlgStep, LossInfo

    class NaNAfter3(RLAlgorithm):
        def __init__(self, observation_spec, action_spec, **kw):
            super().__init__(observation_spec, action_spec, is_on_policy=True,
                             optimizer=functools.partial(torch.optim.SGD, lr=0.1), **kw)
            self.w = nn.Parameter(torch.ones(()))

        def rollout_step(self, time_step, state):
            b = time_step.step_type.shape[0]
            return AlgStep(output=torch.zeros(b, dtype=torch.int64), info=self.w.expand(b))

        def calc_loss(self, info):
            value = info * (float("nan") if learner_of(self).counters.train_iter_num > 3 else 1.0)
            return LossInfo(loss=value, extra={"value_loss": value})

    config = TrainerConfig(algorithm_ctor=NaNAfter3, unroll_length=2, num_iterations=10,
                           checkpoint_interval=2, random_seed=0)
    with pytest.raises(NonFiniteLossError, match=r"(?s)iteration 4.*extra\.value_loss.*ckpt-2\.pt"):
        Trainer(config, tmp_path, progress=False).train()
    assert sorted(p.name for p in (tmp_path / "ckpt").glob("*.pt")) == ["ckpt-2.pt"]


def test_progress_counts_environment_steps_against_the_bound(tmp_path, capsys):
    config = _config(0, num_env_steps=600, checkpoint_interval=1000)
    Trainer(config, tmp_path, progress=True).train()
    err = capsys.readouterr().err.replace("\r", "\n")
    last = [line for line in err.splitlines() if "env steps" in line][-1]
    assert "100%" in last and "/600 " in last and "env steps/s" in last, last
    assert "AverageReturn=" in last, last  # CartPole episodes have ended by then
    # Resuming the finished run (its last iteration went past the bound): a full bar, not
    # a count without a total.
    Trainer(config, tmp_path, progress=True).train()
    err = capsys.readouterr().err.replace("\r", "\n")
    last = [line for line in err.splitlines() if "env steps" in line][-1]
    assert "100%" in last and "/600 " in last, last


def test_a_shortened_run_notes_the_schedules_that_keep_the_confs_lengths(tmp_path):
    # A MultiStepLR whose milestones lie beyond a shortened run never decays; nothing said so.
    r = _train_cli("--conf", "confs/ppo_cartpole.gin", "--root_dir", str(tmp_path / "a"),
                   "--noprogress", "--conf_param", "TrainerConfig.num_env_steps=600",
                   "--conf_param", "TrainerConfig.num_iterations=0")
    assert r.returncode == 0, r.stderr
    assert "note:" not in r.stderr  # stderr is for warnings and the one line of a mistake
    notes = [line for line in r.stdout.splitlines() if line.startswith("note:")]
    assert notes == ["note: TrainerConfig.num_env_steps = 600 here, 100000 in the conf; its "
                     "schedules (PPOAlgorithm.lr_scheduler) keep the lengths the conf gives "
                     "them, in updates or environment steps"], r.stderr
    # No schedule (the A2C example): nothing to note.
    r = _train_cli("--conf", "examples/a2c_cartpole.gin", "--root_dir", str(tmp_path / "b"),
                   "--noprogress", "--conf_param", "TrainerConfig.num_iterations=2")
    assert r.returncode == 0 and "note:" not in r.stdout + r.stderr, r.stdout
    from rlf.trainers.gin_config import conf_values, parse_config, schedules_bound, schedules_note
    length = ["TrainerConfig.num_env_steps", "TrainerConfig.num_iterations"]
    assert conf_values("confs/impala_atari.gin", ["TrainerConfig.num_env_steps",
                                                  "TrainerConfig.unroll_length"]) == [2500000, 20]
    # The conf's own length, bound again (as the suite's runs do): nothing to note.
    own = conf_values("confs/ppo_cartpole.gin", length, 0)
    parse_config("confs/ppo_cartpole.gin", ["TrainerConfig.num_env_steps=100000",
                                            "TrainerConfig.num_iterations=0"])
    assert schedules_note(length, own) is None
    gin.clear_config()
    parse_config("confs/ppo_cartpole.gin", ["TrainerConfig.num_env_steps=5000"])
    assert schedules_note(length, own).startswith(
        "note: TrainerConfig.num_env_steps = 5000 here")
    gin.clear_config()
    gin.parse_config(["DQNAlgorithm.epsilon_greedy = [(0, 1.0), (10, 0.1)]",
                      "DQNAlgorithm.eval_epsilon = 0.0", "DQNAlgorithm.gamma = 0.9",
                      "SACAlgorithm.target_entropy = -1.0",
                      "actor/torch.optim.Adam.lr = 1e-3",
                      "ImpalaAlgorithm.lr_scheduler = @torch.optim.lr_scheduler.StepLR"])
    assert schedules_bound() == ["DQNAlgorithm.epsilon_greedy", "ImpalaAlgorithm.lr_scheduler"]


def test_a_run_shorter_than_its_summary_interval_writes_its_final_metrics(tmp_path):
    # 6 iterations at summary_interval 100 recorded no summary: a suite then found no score.
    def metrics():
        return read_scalar_tags(tmp_path / "train", ["Metrics/AverageReturn"])[
            "Metrics/AverageReturn"]

    Trainer(_config(6, summary_interval=100), tmp_path, progress=False).train()
    steps, values, _ = metrics()
    assert steps == [6] and values[0] > 0
    # A finished run without them (written before they were): started again, it trains
    # nothing and writes them, from the checkpoint's metrics.
    shutil.rmtree(tmp_path / "train")
    result = Trainer(_config(6, summary_interval=100), tmp_path, progress=False).train()
    assert result["iterations"] == 6 and metrics()[:2] == (steps, values)


def test_a_signal_after_the_learners_agreed_counts_at_their_next_agreement():
    # Learner A's stop signal arrives as the all-reduce of the stop flags returns 0 (B had
    # none): A must go on as B does, else A writes its last checkpoint (a barrier) while B
    # trains (an all-gather), and both wait for ever.
    from types import SimpleNamespace

    from rlf.trainers.stop_signals import StopSignals

    def reduce_as_the_signal_arrives(value):
        signals.signum = int(signal.SIGTERM)
        return value

    world = SimpleNamespace(distributed=True, all_reduce_max=reduce_as_the_signal_arrives)
    signals = StopSignals(world, handle=False)
    assert not signals.agreed()  # the agreement: nobody had a signal
    world.all_reduce_max = lambda value: value
    assert signals.agreed()  # the next one: A's signal stops both


def test_an_off_policy_resume_without_its_replay_buffer_says_so_in_one_line(tmp_path, capsys):
    """A resumed off-policy run without ``save_replay_buffer`` starts from an empty buffer and
    waits for ``initial_collect_steps`` again: said once, at the start; not with the buffer."""
    lost = functools.partial(_config, on_policy=False, save_replay_buffer=False,
                             whole_replay_buffer_training=False, clear_replay_buffer=False,
                             mini_batch_size=4, mini_batch_length=2, initial_collect_steps=16)
    Trainer(lost(2), tmp_path / "lost", progress=False).train()
    capsys.readouterr()
    Trainer(lost(3), tmp_path / "lost", progress=False).train()
    err = [line for line in capsys.readouterr().err.splitlines() if "replay buffer" in line]
    assert err == [
        "WARNING: A2C's replay buffer is not in the checkpoint (TrainerConfig.save_replay_buffer "
        "= False): the resumed run refills it from empty and trains again only after "
        "initial_collect_steps = 16 new steps; set TrainerConfig.save_replay_buffer = True to "
        "carry it over (from the next checkpoint on; it costs the buffer's size on disk)"]
    kept = functools.partial(lost, save_replay_buffer=True)
    Trainer(kept(2), tmp_path / "kept", progress=False).train()
    capsys.readouterr()
    Trainer(kept(3), tmp_path / "kept", progress=False).train()
    assert "replay buffer" not in capsys.readouterr().err
    # a ring of one unroll, cleared every iteration, keeps no history to lose
    Trainer(_config(2, on_policy=False, save_replay_buffer=False), tmp_path / "ring",
            progress=False).train()
    capsys.readouterr()
    Trainer(_config(3, on_policy=False, save_replay_buffer=False), tmp_path / "ring",
            progress=False).train()
    assert "replay buffer" not in capsys.readouterr().err


def test_a_resumed_replay_buffer_is_restored_into_the_buffer_the_build_made(tmp_path):
    """The build makes the replay buffer for the unroller's environments before it restores a
    checkpoint, so the saved buffer goes straight into it: held before the first step, as
    saved; a new run's buffer exists as soon as it is built, empty."""
    config = functools.partial(_config, on_policy=False, whole_replay_buffer_training=False,
                               clear_replay_buffer=False, mini_batch_size=4,
                               mini_batch_length=2, replay_buffer_length=64)
    first = Trainer(config(3), tmp_path, progress=False)
    first.train()
    saved = first.loop.replay_buffer.state_dict()
    assert first.loop.replay_buffer.total_size == 3 * 8 * 4
    resumed = Trainer(config(5), tmp_path, progress=False)
    resumed.build()
    try:
        buffer = resumed.loop.replay_buffer
        assert buffer is not None and buffer.total_size == 3 * 8 * 4
        assert buffer.state_dict().keys() == saved.keys()
        assert all(torch.equal(buffer.state_dict()[k], v) for k, v in saved.items())
    finally:
        resumed.close()
    new = Trainer(config(1), tmp_path / "new", progress=False)
    new.build()
    try:
        assert new.loop.replay_buffer is not None and new.loop.replay_buffer.total_size == 0
    finally:
        new.close()


def test_a_finished_run_started_again_says_it_is_finished_and_how_to_go_on(tmp_path, capsys):
    Trainer(_config(2), tmp_path, progress=False).train()
    capsys.readouterr()
    result = Trainer(_config(2), tmp_path, progress=False).train()
    out = capsys.readouterr().out
    assert result["iterations"] == 2
    assert "Resuming" not in out
    assert re.search(re.escape(f"{tmp_path} is a finished run (iteration 2, ") + r"\d+ "
                     + re.escape("environment steps): nothing to train; raise "
                                 "TrainerConfig.num_iterations or num_env_steps to train it "
                                 "further, or give another --root_dir for a new run"), out)


class _KeepsAMemory(A2C):
    """Off-policy A2C keeping every step in a memory of its own beside the replay buffer,
    outside the module tree (a store-time relabelled memory, say), in ``holder``."""

    holder = types.SimpleNamespace

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._store = {"relabelled": self.holder(buffer=None)}

    def experience_sources(self):
        # A memory only filled (fraction 0), kept by the algorithm itself (memory=None).
        return (ExperienceSource("relabelled", sample=lambda mini_batch, k: None,
                                 fraction=0.0, observe=self._observe),)

    def _observe(self, exp):
        store = self._store["relabelled"]
        if store.buffer is None:
            store.buffer = ReplayBuffer(spec_from_tensors(exp),
                                        exp.time_step.step_type.shape[0], 16)
        store.buffer.add_batch(exp, exp.time_step.env_id)


def _memory_config(holder, num_iterations):
    ctor = functools.partial(type("Keeps", (_KeepsAMemory,), {"holder": holder}),
                             hidden=(16,), is_on_policy=False,
                             optimizer=functools.partial(torch.optim.Adam, lr=1e-3))
    return TrainerConfig(algorithm_ctor=ctor, random_seed=3, unroll_length=8,
                         num_iterations=num_iterations, whole_replay_buffer_training=True,
                         clear_replay_buffer=True, save_replay_buffer=True)


def test_a_memory_outside_the_module_tree_is_refused_at_the_first_checkpoint(tmp_path):
    """It made resume inexact without a word; now the first checkpoint is refused, and none
    is written."""
    with pytest.raises(UserError, match=re.escape(
            "Keeps: the ReplayBuffer at self._store['relabelled'].buffer is outside the module "
            "tree, so no checkpoint holds it and a resumed run would start it empty; create "
            "it in the constructor (checkpointed), or hold it in rlf.algorithms.NotCheckpointed "
            "(a resumed run then says it starts empty)")):
        Trainer(_memory_config(types.SimpleNamespace, 2), tmp_path, progress=False).train()
    assert not list((tmp_path / "ckpt").glob("ckpt-*"))


def test_a_memory_declared_not_checkpointed_is_named_when_the_run_resumes(tmp_path, capsys):
    Trainer(_memory_config(NotCheckpointed, 2), tmp_path, progress=False).train()
    capsys.readouterr()
    Trainer(_memory_config(NotCheckpointed, 3), tmp_path, progress=False).train()
    err = capsys.readouterr().err
    assert ("WARNING: A2C's self._store['relabelled'].buffer (NotCheckpointed) held experience "
            "that no checkpoint holds: the resumed run starts it empty, so it does not go on "
            "exactly as the run would have") in err.splitlines()


def test_impalas_experience_replay_is_a_declared_memory(tmp_path):
    from rlf.algorithms import ImpalaAlgorithm
    from rlf.algorithms.memories import not_checkpointed_memories
    from rlf.environments import load
    env = load("CartPole-v1", 2, seed=0)
    alg = ImpalaAlgorithm(env.observation_spec(), env.action_spec(), env=env,
                          config=TrainerConfig(unroll_length=4,
                                               whole_replay_buffer_training=True,
                                               clear_replay_buffer=True),
                          experience_replay_fraction=0.5,
                          optimizer=functools.partial(torch.optim.Adam, lr=1e-3))
    alg.train_iter()
    assert not_checkpointed_memories(alg) == ["_memory.buffer"]
    env.close()


def _impala_replay_config(num_iterations, save_replay_buffer=True, **kw):
    """IMPALA on CartPole with experience replay (a memory of 50 steps per environment,
    half of each mini-batch replayed from the third iteration on)."""
    from rlf.algorithms import ImpalaAlgorithm
    ctor = functools.partial(ImpalaAlgorithm, is_on_policy=False, experience_replay_fraction=0.5,
                             experience_replay_length=50,
                             optimizer=functools.partial(torch.optim.Adam, lr=1e-3))
    return TrainerConfig(algorithm_ctor=ctor, random_seed=3, unroll_length=8,
                         num_iterations=num_iterations, whole_replay_buffer_training=True,
                         clear_replay_buffer=True, save_replay_buffer=save_replay_buffer,
                         checkpoint_interval=100, summary_interval=1, **kw)


@pytest.mark.parametrize("save", [True, False], ids=["saved", "not_saved"])
def test_impalas_replay_memory_goes_beside_the_replay_buffer_and_resumes_exactly(
        tmp_path, capsys, save):
    """With save_replay_buffer the memory is written beside the replay buffer (not in the
    model's checkpoint), restored into the memory the build made, and the resumed run's losses
    are the uninterrupted run's; without it the resumed memory starts empty, which is said,
    and the losses part."""
    Trainer(_impala_replay_config(8, save), tmp_path / "a", progress=False).train()
    Trainer(_impala_replay_config(4, save), tmp_path / "b", progress=False).train()
    ckpt = tmp_path / "b" / "ckpt"
    model = load_checkpoint_file(ckpt / "ckpt-4.pt")
    assert not any("experience_replay" in k for k in model["algorithm"])
    if save:
        replay = load_checkpoint_file(ckpt / "replay_buffer-4.pt")
        memory = replay["memories"]["experience_replay"]
        assert memory["time_step|step_type"].shape == (4, 50)
        assert memory["_current_size"].tolist() == [4 * 8] * 4
        assert "not_checkpointed" not in model["trainer"]
        # ALF's layout is unchanged: the offline reader sees the replay buffer alone
        from rlf.replay.offline import load_replay_checkpoint
        assert load_replay_checkpoint(ckpt / "replay_buffer-4.pt")["_current_size"].tolist() \
            == [9] * 4
    else:
        assert not (ckpt / "replay_buffer-4.pt").exists()
        assert model["trainer"]["not_checkpointed"] == ["_memory.buffer"]
    capsys.readouterr()
    resumed = Trainer(_impala_replay_config(8, save), tmp_path / "b", progress=False)
    resumed.train()
    said = "(NotCheckpointed) held experience that no checkpoint holds" in capsys.readouterr().err
    assert said == (not save)
    a = _scalars(tmp_path / "a", "loss/ImpalaAlgorithm")
    b = _scalars(tmp_path / "b", "loss/ImpalaAlgorithm")
    assert ([b.get(s) for s in range(5, 9)] == [a[s] for s in range(5, 9)]) == save
    assert len(set(a.values())) == len(a)  # the losses do change: not vacuous


def test_impala_with_a_proximal_policy_resumes_exactly(tmp_path):
    """The proximal policy (and its refresh count) is checkpointed with the algorithm: the
    resumed run's losses are the uninterrupted run's."""
    def config(n):
        c = _impala_replay_config(n)
        return c.replace(algorithm_ctor=functools.partial(
            c.run.algorithm_ctor, importance_ratio_clipping=0.3, proximal_policy=True))
    Trainer(config(8), tmp_path / "a", progress=False).train()
    Trainer(config(4), tmp_path / "b", progress=False).train()
    Trainer(config(8), tmp_path / "b", progress=False).train()
    a = _scalars(tmp_path / "a", "loss/ImpalaAlgorithm")
    b = _scalars(tmp_path / "b", "loss/ImpalaAlgorithm")
    assert [b[s] for s in range(5, 9)] == [a[s] for s in range(5, 9)]
    assert len(set(a.values())) == len(a)


def test_a_saved_memory_the_configured_algorithm_has_not_is_named_when_the_run_resumes(
        tmp_path, capsys):
    Trainer(_impala_replay_config(2), tmp_path, progress=False).train()
    capsys.readouterr()
    config = _impala_replay_config(3)
    config = config.replace(algorithm_ctor=functools.partial(
        config.run.algorithm_ctor, experience_replay_fraction=0.0,
        experience_replay_length=10000))  # (the default: no memory setting without replay)
    Trainer(config, tmp_path, progress=False).train()
    assert ("WARNING: the checkpoint holds the memories of experience sources "
            "['experience_replay'], which ImpalaAlgorithm as configured has not: the resumed "
            "run goes on without them") in capsys.readouterr().err.splitlines()


def _ppo(root, iterations, *extra):
    """A tiny PPO CartPole run of the shipped conf through rlf.train (gin-configured, so that
    play and load_policy rebuild it from its config.gin)."""
    import rlf
    return rlf.train(str(REPO / "confs" / "ppo_cartpole.gin"), root_dir=root, progress=False,
                     bindings=["load.num_envs = 2", "TrainerConfig.unroll_length = 8",
                               "TrainerConfig.mini_batch_size = 8",
                               "TrainerConfig.num_env_steps = 0",
                               f"TrainerConfig.num_iterations = {iterations}", *extra])


def test_the_best_evaluations_policy_is_kept_beside_the_newest(tmp_path, capsys):
    """ckpt/best.pt follows every evaluation that beat the run's earlier ones, resumed
    sessions included, outlives retention, and is what load_policy and play take as
    'best'."""
    import rlf
    from rlf.trainers.best_checkpoint import best_checkpoint_path
    evaluating = ("TrainerConfig.evaluate = True", "TrainerConfig.eval_interval = 1",
                  "TrainerConfig.num_eval_episodes = 2", "TrainerConfig.checkpoint_interval = 2",
                  "TrainerConfig.num_checkpoints = 1")
    _ppo(tmp_path, 4, *evaluating)
    _ppo(tmp_path, 6, *evaluating)  # resumed: the bar its file records stays
    out = capsys.readouterr().out
    returns = [float(v) for v in re.findall(r"eval AverageReturn ([\d.]+)", out)]
    assert len(returns) == 6
    best = load_checkpoint_file(best_checkpoint_path(tmp_path))["best"]
    assert best["metric"] == "AverageReturn" and best["value"] == pytest.approx(max(returns),
                                                                                abs=0.01)
    assert best["iteration"] == 1 + returns.index(max(returns))
    assert sorted(p.name for p in (tmp_path / "ckpt").glob("*.pt")) == ["best.pt", "ckpt-6.pt"]
    policy = rlf.load_policy(tmp_path, checkpoint="best")
    assert policy.checkpoint == best_checkpoint_path(tmp_path)
    r = subprocess.run([sys.executable, "-m", "rlf.bin.play", "--root_dir", str(tmp_path),
                        "--num_episodes", "1", "--checkpoint", "best"], cwd=REPO,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and f"checkpoint {tmp_path / 'ckpt' / 'best.pt'}" in r.stdout, \
        r.stderr


def test_best_is_one_line_where_nothing_was_evaluated(tmp_path):
    import rlf
    _ppo(tmp_path, 2, "TrainerConfig.evaluate = False")
    with pytest.raises(UserError, match=r"checkpoint='best': .*best.pt does not exist: the run "
                                        r"has not evaluated yet"):
        rlf.load_policy(tmp_path, checkpoint="best")
    r = subprocess.run([sys.executable, "-m", "rlf.bin.play", "--root_dir", str(tmp_path),
                        "--checkpoint", "best"], cwd=REPO, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 2 and len(r.stderr.splitlines()) == 1
    assert r.stderr.startswith("error: --checkpoint best: "), r.stderr


def test_evaluation_videos_are_written_beside_the_run_and_to_tensorboard(tmp_path):
    pytest.importorskip("pygame", reason="CartPole renders its frames with the play extra")
    import cv2
    from PIL import Image
    Trainer(_config(4, evaluate=True, eval_interval=1, num_eval_episodes=1,
                    eval_video_interval=2), tmp_path, progress=False).train()
    assert sorted(p.name for p in (tmp_path / "videos").iterdir()) == ["eval-2.mp4",
                                                                        "eval-4.mp4"]
    lengths = [int(v) for v in _scalars(tmp_path, "Eval/AverageEpisodeLength").values()]
    video = cv2.VideoCapture(str(tmp_path / "videos" / "eval-2.mp4"))
    frames = int(video.get(cv2.CAP_PROP_FRAME_COUNT))
    assert frames == lengths[1] + 1  # its FIRST step's frame and one per step after it
    assert (int(video.get(cv2.CAP_PROP_FRAME_HEIGHT)),
            int(video.get(cv2.CAP_PROP_FRAME_WIDTH))) == (400, 600)  # CartPole's own render
    # TensorBoard's reader finds them as the images an add_video writes
    accumulator = EventAccumulator(str(tmp_path / "train"), size_guidance={"images": 0})
    accumulator.Reload()
    images = accumulator.Images("Eval/video")
    assert [e.step for e in images] == [2, 4]
    gif = Image.open(io.BytesIO(images[0].encoded_image_string))
    assert gif.format == "GIF" and 1 < gif.n_frames <= frames  # (repeated frames merged)


def test_a_video_interval_without_evaluation_is_one_line():
    with pytest.raises(ValueError) as raised:
        TrainerConfig(eval_video_interval=2)
    assert one_line(raised.value) == ("TrainerConfig: eval_video_interval = 2 takes effect only "
                                      "with evaluation: set TrainerConfig.evaluate = True too, "
                                      "or remove it")
