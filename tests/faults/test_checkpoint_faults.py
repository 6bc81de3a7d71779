"""Checkpoint faults on real runs: an unreadable newest checkpoint (truncated, random bytes,
empty), broken checkpoint + replay-buffer pairs, the temporary files of killed saves, and
``rlf.bin.play`` over the same directories. Nothing good may be deleted, nothing unreadable
counted or deleted, and every skip is one warning line."""

import random
import subprocess
import sys

import gin
import pytest
import torch

from rlf.trainers.gin_config import parse_config
from rlf.trainers import Trainer
from tests.faults._cli import CARTPOLE, REPO, digests, lines, run_cli, sha256

CORRUPTIONS = {
    "truncated": lambda data: data[:1000],
    "random_bytes": lambda data: random.Random(0).randbytes(len(data)),
    "empty": lambda data: b"",
}


def _names(directory):
    return sorted(p.name for p in directory.iterdir())


def _train(root, capsys=None, **bindings):
    """A CartPole IMPALA run of the shipped conf through ``Trainer``, in this process."""
    params = [f"TrainerConfig.{k} = {v!r}" for k, v in bindings.items()]
    parse_config(str(REPO / "confs" / "impala_cartpole.gin"),
                 ["TrainerConfig.evaluate = False", "TrainerConfig.num_env_steps = 0"] + params)
    try:
        from rlf.algorithms import TrainerConfig
        return Trainer(TrainerConfig(), root, progress=False).train()
    finally:
        gin.clear_config()


def _warnings(err):
    return [line for line in lines(err) if line.startswith("WARNING")]


@pytest.mark.parametrize("kind", CORRUPTIONS)
def test_an_unreadable_newest_checkpoint_is_set_aside_not_counted(tmp_path, capsys, kind):
    ckpt = tmp_path / "ckpt"
    _train(tmp_path, num_iterations=20, checkpoint_interval=5, num_checkpoints=2)
    assert _names(ckpt) == ["ckpt-15.pt", "ckpt-20.pt"]
    newest = ckpt / "ckpt-20.pt"
    newest.write_bytes(CORRUPTIONS[kind](newest.read_bytes()))
    bad, good = sha256(newest), sha256(ckpt / "ckpt-15.pt")
    capsys.readouterr()
    result = _train(tmp_path, num_iterations=25, checkpoint_interval=5, num_checkpoints=2)
    out, err = capsys.readouterr()
    assert result["iterations"] == 25 and "Resuming from iteration 15" in out
    warnings = _warnings(err)
    assert len(warnings) == 1, err
    assert "skipping checkpoint 20" in warnings[0]
    assert "ckpt-20.pt -> ckpt-20.pt.corrupt" in warnings[0]
    # the good previous checkpoint was kept until two newer readable ones existed
    assert _names(ckpt) == ["ckpt-20.pt", "ckpt-20.pt.corrupt", "ckpt-25.pt"]
    assert sha256(ckpt / "ckpt-20.pt.corrupt") == bad  # moved, byte for byte
    assert good != sha256(ckpt / "ckpt-20.pt")


def test_cli_num_checkpoints_1_keeps_the_new_checkpoints(tmp_path):
    # The reproduction of the report: the only checkpoint is corrupt, the rerun starts over.
    args = [*CARTPOLE, "--root_dir", str(tmp_path), "--conf_param",
            "TrainerConfig.checkpoint_interval=5", "--conf_param",
            "TrainerConfig.num_checkpoints=1"]
    r = run_cli("train", *args, "--conf_param", "TrainerConfig.num_iterations=20")
    assert r.returncode == 0, r.stderr
    newest = tmp_path / "ckpt" / "ckpt-20.pt"
    newest.write_bytes(newest.read_bytes()[:1000])
    bad = sha256(newest)
    r = run_cli("train", *args, "--conf_param", "TrainerConfig.num_iterations=12")
    assert r.returncode == 0, r.stderr
    assert "Starting a new run" in r.stdout and "finished: 12 iterations" in r.stdout
    assert len(_warnings(r.stderr)) == 1 and "ckpt-20.pt.corrupt" in r.stderr
    assert _names(tmp_path / "ckpt") == ["ckpt-12.pt", "ckpt-20.pt.corrupt"]
    assert sha256(tmp_path / "ckpt" / "ckpt-20.pt.corrupt") == bad
    torch.load(tmp_path / "ckpt" / "ckpt-12.pt", weights_only=True)  # readable


def test_a_broken_replay_buffer_falls_back_to_the_newest_complete_pair(tmp_path, capsys):
    ckpt = tmp_path / "ckpt"
    _train(tmp_path, num_iterations=20, checkpoint_interval=5, num_checkpoints=2,
           save_replay_buffer=True)
    assert _names(ckpt) == ["ckpt-15.pt", "ckpt-20.pt", "replay_buffer-15.pt",
                            "replay_buffer-20.pt"]
    replay = ckpt / "replay_buffer-20.pt"
    replay.write_bytes(replay.read_bytes()[:2000])
    before = digests(ckpt)
    capsys.readouterr()
    result = _train(tmp_path, num_iterations=15, checkpoint_interval=5, num_checkpoints=2,
                    save_replay_buffer=True)
    out, err = capsys.readouterr()
    assert result["iterations"] == 15 and "is a finished run (iteration 15" in out
    warnings = _warnings(err)
    assert len(warnings) == 1 and "replay_buffer-20.pt is unreadable" in warnings[0], err
    assert "replay_buffer-20.pt -> replay_buffer-20.pt.corrupt" in warnings[0]
    assert "ckpt-20.pt -> ckpt-20.pt.unpaired" in warnings[0]
    after = digests(ckpt)
    assert after["replay_buffer-20.pt.corrupt"] == before["replay_buffer-20.pt"]
    assert after["ckpt-20.pt.unpaired"] == before["ckpt-20.pt"]
    assert after["ckpt-15.pt"] == before["ckpt-15.pt"]


def test_a_replay_buffer_without_its_checkpoint_is_never_taken(tmp_path, capsys):
    ckpt = tmp_path / "ckpt"
    _train(tmp_path, num_iterations=20, checkpoint_interval=5, num_checkpoints=2,
           save_replay_buffer=True)
    (ckpt / "ckpt-20.pt").unlink()  # killed between the replay file's write and the ckpt's
    orphan = sha256(ckpt / "replay_buffer-20.pt")
    # a checkpoint written before ckpt files listed their companions still pairs by name
    old = torch.load(ckpt / "ckpt-15.pt", weights_only=True)
    del old["_companions"]
    torch.save(old, ckpt / "ckpt-15.pt")
    capsys.readouterr()
    result = _train(tmp_path, num_iterations=17, checkpoint_interval=5, num_checkpoints=2,
                    save_replay_buffer=True)
    out, err = capsys.readouterr()
    assert result["iterations"] == 17 and "Resuming from iteration 15" in out
    assert not _warnings(err)
    assert _names(ckpt) == ["ckpt-15.pt", "ckpt-17.pt", "replay_buffer-15.pt",
                            "replay_buffer-17.pt", "replay_buffer-20.pt"]
    assert sha256(ckpt / "replay_buffer-20.pt") == orphan  # left for its step's next save


def test_temporary_files_of_dead_processes_are_removed_and_only_those(tmp_path, capsys):
    _train(tmp_path, num_iterations=5, checkpoint_interval=5)
    ckpt = tmp_path / "ckpt"
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    alive = subprocess.Popen(["sleep", "120"])
    try:
        stale = [ckpt / f".ckpt-10.pt.tmp-{gone.pid}",
                 ckpt / f".replay_buffer-10.pt.tmp-{gone.pid}",
                 tmp_path / f".config.gin.tmp-{gone.pid}"]
        kept = [ckpt / f".ckpt-10.pt.tmp-{alive.pid}", ckpt / ".notes.tmp-x",
                ckpt / "ckpt-10.pt.tmp"]
        for p in stale + kept:
            p.write_bytes(b"half a file")
        capsys.readouterr()
        _train(tmp_path, num_iterations=6, checkpoint_interval=5)
        err = capsys.readouterr().err
        assert not any(p.exists() for p in stale)
        assert all(p.read_bytes() == b"half a file" for p in kept)
        warnings = _warnings(err)
        assert len(warnings) == 3 and all(f"({gone.pid})" in w for w in warnings), err
    finally:
        alive.kill()
        alive.wait()


def test_play_falls_back_like_training_and_lists_existing_steps(tmp_path):
    _train(tmp_path, num_iterations=20, checkpoint_interval=5, num_checkpoints=2)
    ckpt = tmp_path / "ckpt"
    newest = ckpt / "ckpt-20.pt"
    newest.write_bytes(newest.read_bytes()[:1000])
    before = digests(ckpt)
    r = run_cli("play", "--root_dir", str(tmp_path), "--num_episodes", "1")
    assert r.returncode == 0, r.stderr
    assert lines(r.stderr) == _warnings(r.stderr) and len(lines(r.stderr)) == 1, r.stderr
    assert "skipping checkpoint 20" in r.stderr and "ckpt-15.pt" in r.stdout
    assert digests(ckpt) == before  # play renames nothing
    r = run_cli("play", "--root_dir", str(tmp_path), "--checkpoint_step", "7")
    assert r.returncode == 2 and len(lines(r.stderr)) == 1, r.stderr
    assert "has no ckpt-7.pt; the steps it has: [15, 20]" in r.stderr
    r = run_cli("play", "--root_dir", str(tmp_path), "--checkpoint_step", "20")
    assert r.returncode == 2 and len(lines(r.stderr)) == 1, r.stderr
    assert "ckpt-20.pt is unreadable" in r.stderr
    assert digests(ckpt) == before
    for record, message in (("e.avi", "use a .gif or .mp4 file name"),
                            ("no/e.gif", f"the folder {tmp_path / 'no'} does not exist")):
        r = run_cli("play", "--root_dir", str(tmp_path), "--record", str(tmp_path / record))
        assert r.returncode == 2 and len(lines(r.stderr)) == 1, r.stderr
        assert lines(r.stderr)[0].startswith("error: --record: video file ") and (
            message in r.stderr), r.stderr
        assert "episode 0" not in r.stdout  # refused before playing
    # An empty name was 'video file .: use a .gif or .mp4 file name'.
    r = run_cli("play", "--root_dir", str(tmp_path), "--record", "")
    assert r.returncode == 2 and lines(r.stderr) == [
        "error: --record: the video file name is empty: give a .gif or .mp4 file name"], r.stderr
    # A --conf_param value a constructor refuses, or one that changes the network (another
    # game, other layers), was a traceback.
    for binding, message in (("TrainerConfig.random_seed=-1",
                              "TrainerConfig.random_seed must be in [0, 2**30)"),
                             ("ImpalaAlgorithm.gamma=2.0",
                              "ImpalaAlgorithm: gamma must be in [0, 1], got 2.0"),
                             ("MLPEncoder.hidden=(8,)",
                              f"{ckpt / 'ckpt-15.pt'} does not fit the configured algorithm: "
                              f"ImpalaAlgorithm: the checkpoint does not fit this algorithm: ")):
        r = run_cli("play", "--root_dir", str(tmp_path), "--checkpoint_step", "15",
                    "--conf_param", binding)
        assert r.returncode == 2 and len(lines(r.stderr)) == 1, r.stderr
        assert lines(r.stderr)[0].startswith(f"error: {message}"), r.stderr
    assert digests(ckpt) == before


def test_a_replay_buffer_of_another_size_is_refused_before_resuming(tmp_path):
    """Resuming with a replay buffer of another length than the saved one's (here the conf
    clears the buffer each iteration, so its length is ``unroll_length + 1``) was a traceback
    at the first unroll, after the summaries were reopened: one line naming the setting that
    changed, exit 2, and nothing in the run directory changed."""
    first = run_cli("train", *CARTPOLE, "--root_dir", str(tmp_path),
                    "--conf_param", "TrainerConfig.save_replay_buffer=True")
    assert first.returncode == 0, first.stderr
    ckpt = tmp_path / "ckpt"
    assert _names(ckpt) == ["ckpt-3.pt", "replay_buffer-3.pt"]
    envs, length = torch.load(ckpt / "replay_buffer-3.pt")["algorithm"][
        "_replay_buffer.time_step|step_type"].shape
    before = {d: digests(tmp_path / d) for d in ("ckpt", "train")}
    r = run_cli("train", *CARTPOLE, "--root_dir", str(tmp_path),
                "--conf_param", "TrainerConfig.save_replay_buffer=True",
                "--conf_param", f"TrainerConfig.unroll_length={length + 7}",
                "--conf_param", "TrainerConfig.num_iterations=6")
    assert r.returncode == 2 and len(lines(r.stderr)) == 1, r.stderr
    assert lines(r.stderr)[0].startswith(
        f"error: ImpalaAlgorithm: the checkpoint's replay buffer holds {envs} environments x "
        f"{length} steps, this configuration's {envs} x {length + 8} (load.num_envs x "
        f"TrainerConfig.unroll_length + 1). The checkpoint was left untouched"), r.stderr
    # The settings that differ from the run's config.gin, but not the run's length.
    assert lines(r.stderr)[0].endswith(
        f"; settings that differ from it: TrainerConfig.unroll_length = {length + 7} (the "
        f"run's: {length - 1})"), r.stderr
    assert {d: digests(tmp_path / d) for d in ("ckpt", "train")} == before


def test_a_checkpoint_that_cannot_be_written_stops_the_run_in_one_line(tmp_path):
    """A full disk (here a file-size limit) was a traceback of torch's "unexpected pos"; now
    one line naming the file and the newest checkpoint, which is kept, and exit status 1."""
    first = run_cli("train", *CARTPOLE, "--root_dir", str(tmp_path))
    assert first.returncode == 0, first.stderr
    kept = digests(tmp_path / "ckpt")
    assert list(kept) == ["ckpt-3.pt"]
    r = run_cli("train", *CARTPOLE, "--root_dir", str(tmp_path), "--conf_param",
                "TrainerConfig.num_iterations=5", file_size_limit=64 * 1024)
    assert r.returncode == 1 and len(lines(r.stderr)) == 1, r.stderr
    ckpt = tmp_path / "ckpt"
    assert lines(r.stderr)[0] == (
        f"error: could not write the checkpoint of iteration 5 ({ckpt / 'ckpt-5.pt'}): the "
        f"file could not be written in full; training stopped and the last good checkpoint "
        f"is {ckpt / 'ckpt-3.pt'}; make room and run again with the same --root_dir to "
        f"resume")
    assert digests(ckpt) == kept
    again = run_cli("train", *CARTPOLE, "--root_dir", str(tmp_path),
                    "--conf_param", "TrainerConfig.num_iterations=5")
    assert again.returncode == 0 and "Resuming from iteration 3" in again.stdout, again.stderr
    # The run's config.gin, written before the first iteration, likewise.
    small = tmp_path / "small"
    r = run_cli("train", *CARTPOLE, "--root_dir", str(small), file_size_limit=2048)
    assert r.returncode == 1 and lines(r.stderr) == [
        f"error: could not write {small / 'config.gin'}: File too large; training stopped and "
        f"no checkpoint was written yet; make room and run again with the same --root_dir to "
        f"resume"], r.stderr
    assert not (small / "config.gin").exists()


def test_summaries_that_cannot_be_written_stop_the_run_in_one_line(tmp_path):
    """TensorBoard's writer thread failing (a full disk) was a traceback from the thread and
    another from the next write; now one line naming the event directory and the newest
    checkpoint, which is kept, and exit status 1."""
    r = run_cli("train", *CARTPOLE, "--root_dir", str(tmp_path),
                "--conf_param", "TrainerConfig.summary_interval=1",
                "--conf_param", "TrainerConfig.checkpoint_interval=20",
                "--conf_param", "TrainerConfig.num_iterations=2000", file_size_limit=256 * 1024)
    ckpt = tmp_path / "ckpt"
    assert r.returncode == 1 and len(lines(r.stderr)) == 1, r.stderr
    newest = max(int(name[5:-3]) for name in _names(ckpt))  # events of ~7 kB per iteration
    assert 20 <= newest < 2000
    assert lines(r.stderr)[0] == (
        f"error: could not write the TensorBoard summaries in {tmp_path / 'train'}: File too "
        f"large; training stopped and the last good checkpoint is "
        f"{ckpt / f'ckpt-{newest}.pt'}; make room and run again with the same --root_dir to "
        f"resume"), r.stderr
    again = run_cli("train", *CARTPOLE, "--root_dir", str(tmp_path),
                    "--conf_param", f"TrainerConfig.num_iterations={newest + 2}")
    assert again.returncode == 0 and f"Resuming from iteration {newest}" in again.stdout, \
        again.stderr


def test_an_evaluation_that_fails_stops_the_run_after_a_checkpoint(tmp_path):
    """A NaN reward met in evaluation stopped the run without saving the iterations trained
    since the last checkpoint."""
    conf = tmp_path / "nan.gin"
    conf.write_text(f'import tests.faults._nan_env\ninclude "{REPO}/confs/impala_cartpole.gin"\n'
                    'load.env_name = "NanRewardInEvaluationCartPole-v0"\n')
    args = [a if a != "confs/impala_cartpole.gin" else str(conf) for a in CARTPOLE]
    r = run_cli("train", *args, "--root_dir", str(tmp_path / "run"),
                "--conf_param", "TrainerConfig.evaluate=True",
                "--conf_param", "TrainerConfig.eval_interval=2",
                "--conf_param", "TrainerConfig.num_iterations=6")
    ckpt = tmp_path / "run" / "ckpt"
    assert r.returncode == 2 and len(lines(r.stderr)) == 1, r.stderr
    assert lines(r.stderr)[0] == (
        "error: evaluation at iteration 2: environment NanRewardInEvaluationCartPole-v0 "
        "returned the reward nan in its copy 0; rlf needs finite rewards: fix the environment "
        "or wrap it (gymnasium.wrappers.TransformReward); training stopped, checkpoint "
        f"written: {ckpt / 'ckpt-2.pt'}"), r.stderr
    assert _names(ckpt) == ["ckpt-2.pt"]


def test_a_mistake_met_in_training_names_the_iteration_and_the_checkpoint(tmp_path):
    """A UserError raised inside an iteration (a NaN reward) cannot be saved after: the line
    says where training stopped and which checkpoint to resume from."""
    conf = tmp_path / "nan.gin"
    conf.write_text(f'import tests.faults._nan_env\ninclude "{REPO}/confs/impala_cartpole.gin"\n'
                    'load.env_name = "NanRewardCartPole-v0"\n')
    args = [a if a != "confs/impala_cartpole.gin" else str(conf) for a in CARTPOLE]
    r = run_cli("train", *args, "--root_dir", str(tmp_path / "run"))
    assert r.returncode == 2 and len(lines(r.stderr)) == 1, r.stderr
    assert lines(r.stderr)[0].startswith(
        "error: environment NanRewardCartPole-v0 returned the reward nan in its copy ")
    assert lines(r.stderr)[0].endswith(
        "(iteration 1; no checkpoint was written yet; nothing was saved after the failure)")
    assert not (tmp_path / "run" / "ckpt").exists() or not _names(tmp_path / "run" / "ckpt")
