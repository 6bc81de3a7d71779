"""rlf.bin.suite: human-normalised scores against hand-computed values, the results table, and
a resumed suite on tiny real Atari runs."""

import csv
import math
import os
import signal
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rlf.bin.suite import last_tenth_score, parse_frames, read_run, write_tables
from rlf.utils.atari_scores import REFERENCE_SCORES, game_of, human_normalized_score

REPO = Path(__file__).resolve().parents[1]
TINY = ["--conf_param", "load.num_envs=4", "--conf_param", "TrainerConfig.summary_interval=1",
        "--conf_param", "TrainerConfig.metric_min_buffer_size=4",
        "--conf_param", "TrainerConfig.checkpoint_interval=5",
        # episodes cut at 100 agent steps: some end in every run, whatever the policy learned
        "--conf_param", "load_atari.max_num_frames_per_episode=400"]


def test_human_normalized_scores_by_hand():
    assert human_normalized_score("Pong", -20.7) == 0.0  # random
    assert human_normalized_score("Pong", 14.6) == pytest.approx(1.0)  # human
    assert human_normalized_score("ALE/Breakout-v5", 16.1) == pytest.approx(0.5)  # 14.4 / 28.8
    assert human_normalized_score("SpaceInvaders", 908.35) == pytest.approx(0.5)
    assert human_normalized_score("BeamRider", 363.9 + 2 * (16926.5 - 363.9)) == \
        pytest.approx(2.0)
    assert math.isnan(human_normalized_score("NoSuchGame", 1.0))
    assert game_of("BreakoutNoFrameskip-v4") == "Breakout" and game_of("ALE/Qbert-v5") == "Qbert"
    assert parse_frames("10M") == 10_000_000 and parse_frames("500k") == 500_000
    with pytest.raises(ValueError, match="not a number of frames"):
        parse_frames("ten")
    # the eight games outside Mnih et al. 2015's 49, by hand from the Atari-57 tables
    assert human_normalized_score("Skiing", (-17098.1 - 4336.9) / 2) == pytest.approx(0.5)
    assert human_normalized_score("ALE/YarsRevenge-v5", 54576.9) == pytest.approx(1.0)


def test_reference_scores_cover_atari_57_under_ale_v5_names():
    from rlf.environments import find_spec
    assert len(REFERENCE_SCORES) == 57
    for game, (random, human) in REFERENCE_SCORES.items():
        find_spec(f"ALE/{game}-v5")  # raises for a name ALE does not register
        assert human > random, game


def test_results_table_has_one_row_per_run_and_the_means_per_game(tmp_path):
    row = dict(frames=10_000_000, clipped_return=0.0, wall_minutes=40.0,
               agent_steps_per_s=1000.0)
    rows = [dict(row, game="Breakout", seed=0, score=20.0, score_last_10pct=18.0,
                 human_normalized=human_normalized_score("Breakout", 20.0)),
            dict(row, game="Breakout", seed=1, score=30.0, score_last_10pct=26.0,
                 human_normalized=human_normalized_score("Breakout", 30.0)),
            dict(row, game="Pong", seed=0, score=18.0, score_last_10pct=17.5,
                 human_normalized=human_normalized_score("Pong", 18.0)),
            # a score of five digits kept whole (it was 1.271e+04)
            dict(row, game="Qbert", seed=0, score=12714.0, score_last_10pct=12296.0002734375,
                 human_normalized=human_normalized_score("Qbert", 12714.0))]
    write_tables(rows, tmp_path)
    with open(tmp_path / "results.csv") as f:
        table = list(csv.DictReader(f))
    assert [(r["game"], r["seed"], r["score"]) for r in table] == [
        ("Breakout", "0", "20"), ("Breakout", "1", "30"), ("Pong", "0", "18"),
        ("Qbert", "0", "12714")]
    assert table[3]["score_last_10pct"] == "12296.0003" and table[3]["human_normalized"] == (
        "0.9442")
    md = (tmp_path / "results.md").read_text().splitlines()
    # Breakout: mean 25 (20, 30); normalised ((20-1.7) + (30-1.7)) / 2 / 28.8 = 0.809
    assert md[2] == "| Breakout | 0, 1 | 25.0 (20.0, 30.0) | 22.0 | 0.809 | 10,000,000 | 40 |"
    assert md[3].startswith("| Pong | 0 | 18.0 (18.0) | 17.5 | 1.096 |")


def test_a_table_write_that_fails_leaves_the_previous_tables_whole(tmp_path, monkeypatch):
    row = dict(game="Pong", seed=0, score=18.0, score_last_10pct=17.5, human_normalized=1.0,
               frames=4000, clipped_return=18.0, wall_minutes=1.0, agent_steps_per_s=10.0)
    write_tables([row], tmp_path)
    before = {n: (tmp_path / n).read_bytes() for n in ("results.csv", "results.md")}

    def fail(self, row):
        raise OSError("disk full")

    monkeypatch.setattr(csv.DictWriter, "writerow", fail)
    with pytest.raises(OSError, match="disk full"):
        write_tables([dict(row, score=-21.0)], tmp_path)
    assert {n: (tmp_path / n).read_bytes() for n in before} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(before)  # no temporary left


def test_the_last_tenth_is_the_mean_of_the_episodes_ending_in_it(tmp_path):
    from torch.utils.tensorboard import SummaryWriter
    w = SummaryWriter(str(tmp_path))
    tag = "Metrics_new_episodes_vs_EnvironmentSteps/"
    # summaries at agent steps 100-400: the mean of the episodes ended since the previous
    # summary, and their number
    for step, mean, n in [(100, 1.0, 1), (200, 2.0, 2), (300, 3.0, 3), (400, 4.0, 4)]:
        w.add_scalar(tag + "AverageEpisodeScore", mean, step)
        w.add_scalar(tag + "NumberOfEpisodes", n, step)
    w.close()
    score = "Metrics_vs_EnvironmentSteps/AverageEpisodeScore"
    series = read_run(tmp_path)
    # from step 250: 3 episodes averaging 3 and 4 averaging 4 -> 25 / 7, not (3 + 4) / 2
    assert last_tenth_score(series, 250, score) == (pytest.approx(25 / 7), 7)
    assert last_tenth_score(series, 100, score) == (pytest.approx(30 / 10), 10)
    mean, episodes = last_tenth_score(series, 401, score)
    assert math.isnan(mean) and episodes == 0
    # a window that ends at step 350: 2 averaging 2 and 3 averaging 3 -> 13 / 5
    assert last_tenth_score(series, 150, score, end_step=350) == (pytest.approx(13 / 5), 5)


def test_a_runs_speed_and_minutes_leave_out_the_pause_between_stop_and_resume(tmp_path):
    # The speed was the steps over the wall time from the first summary to the last, and a
    # run stopped for an hour and resumed counted the hour.
    from torch.utils.tensorboard import SummaryWriter
    from rlf.bin.suite import SCORE_TAG, summarize_run
    train = tmp_path / "train"
    first = SummaryWriter(str(train))
    for step in (0, 1000, 2000):  # 1,000 agent steps per 10 s
        first.add_scalar(SCORE_TAG, 1.0, step, walltime=10.0 * step / 1000)
    first.close()
    time.sleep(1.1)  # the resumed run's file sorts after
    resumed = SummaryWriter(str(train))
    for step in (3000, 4000):  # resumed 3,600 s later, at 500 agent steps per 10 s
        resumed.add_scalar(SCORE_TAG, 2.0, step, walltime=3600.0 + 20.0 * step / 1000)
    resumed.close()
    row = summarize_run(tmp_path, "Pong", 0, 4)
    rate = 3000 / 40  # 2,000 steps in 20 s, then 1,000 in 20 s (none counted between files)
    assert row["agent_steps_per_s"] == pytest.approx(rate)
    assert row["wall_minutes"] == pytest.approx(4000 / rate / 60)  # not an hour
    assert row["frames"] == 16000 and row["score"] == 2.0


def _suite(root, *extra, seeds=("0,1",)):
    return subprocess.run(
        [sys.executable, "-m", "rlf.bin.suite", "--conf", "confs/impala_atari_sync.gin",
         "--games", "Breakout", "--seeds", *seeds, "--frames", "4000", "--root_dir", str(root),
         *TINY, *extra], cwd=REPO, capture_output=True, text=True, timeout=600)


def test_an_interrupted_suite_resumes_the_unfinished_run_and_skips_finished_ones(tmp_path):
    # seed 0 was interrupted: a checkpoint at 500 of its 1,000 agent steps, no result
    seed0 = tmp_path / "Breakout" / "seed0"
    r = subprocess.run(
        [sys.executable, "-m", "rlf.bin.train", "--conf", "confs/impala_atari_sync.gin",
         "--root_dir", str(seed0), "--noprogress", "--conf_param",
         "load.env_name='ALE/Breakout-v5'", "--conf_param", "TrainerConfig.random_seed=0",
         "--conf_param", "TrainerConfig.num_env_steps=500", *TINY],
        cwd=REPO, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    r = _suite(tmp_path)
    assert r.returncode == 0, r.stderr
    assert "Resuming from iteration" in r.stdout  # seed 0 went on from its checkpoint
    assert "--frames 4,000 differs from the conf's 10,000,000 frames" in r.stdout
    assert r.stdout.count("Starting a new run") == 1  # seed 1 started afresh
    table = list(csv.DictReader(open(tmp_path / "results.csv")))
    assert [row["seed"] for row in table] == ["0", "1"]
    assert all(int(row["frames"]) >= 4000 for row in table)
    assert all(int(row["last_10pct_episodes"]) >= 0 for row in table)
    assert (tmp_path / "Breakout.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    ckpts = {p: p.stat().st_mtime_ns for p in tmp_path.glob("Breakout/seed*/ckpt/*.pt")}
    r = _suite(tmp_path, seeds=("0", "1"))  # a list flag takes space-separated values too
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("finished, skipped") == 2 and "rlf.bin.train" not in r.stdout
    assert {p: p.stat().st_mtime_ns for p in ckpts} == ckpts  # nothing was retrained
    # Finished runs asked for other settings: they were skipped, and the table mixed them.
    for extra, message in (
            (["--conf_param", "ImpalaAlgorithm.gamma=0.98"],
             "was made without --conf_param 'ImpalaAlgorithm.gamma=0.98': give the same "
             "bindings, or another --root_dir"),
            (["--frames", "2000"], "ran 4,000 frames, more than --frames 2,000: give "
                                   "--frames 4,000, or another --root_dir")):
        r = _suite(tmp_path, *extra)
        assert r.returncode == 2 and r.stderr.strip() == (
            f"error: the finished run in {tmp_path / 'Breakout' / 'seed0'} {message}"), r.stderr
    r = _suite(tmp_path, "--frames", "6000", seeds=("1",))  # longer: resumed for the rest
    assert r.returncode == 0, r.stderr
    assert "Resuming from iteration" in r.stdout and "finished, skipped" not in r.stdout
    table = list(csv.DictReader(open(tmp_path / "results.csv")))
    assert [row["seed"] for row in table] == ["1"] and int(table[0]["frames"]) >= 6000


def _raised(output):
    """Whether ``output`` holds a traceback other than those Python prints for an exception
    it ignores ("Exception ignored in ...": a trial's SIGTERM handler raising SystemExit
    inside a weakref callback, say)."""
    lines = output.splitlines()
    return any("Traceback (most recent call last)" in line
               and not (i and "Exception ignored in" in lines[i - 1])
               for i, line in enumerate(lines))


def _runs_of(directory):
    """Pids of the rlf.bin.train processes whose command line names a path in ``directory``."""
    pids = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            args = cmdline.read_bytes().split(b"\0")
        except OSError:  # the process ended
            continue
        if b"rlf.bin.train" in args and any(a.startswith(str(directory).encode())
                                            for a in args):
            pids.append(int(cmdline.parent.name))
    return pids


def _kill_runs(directory):
    """Kills what a failed test left training in ``directory``."""
    for pid in _runs_of(directory):
        os.kill(pid, signal.SIGKILL)


def _suite_until_first_checkpoint(tmp_path):
    """A suite of two 400k-frame runs, started in its own session, once its first run has
    written a checkpoint."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "rlf.bin.suite", "--conf", "confs/impala_atari_sync.gin",
         "--games", "Breakout", "--seeds", "0,1", "--frames", "400k", "--root_dir",
         str(tmp_path), *TINY], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, start_new_session=True)
    deadline = time.time() + 300
    while not list(tmp_path.glob("Breakout/seed0/ckpt/ckpt-*.pt")):
        if proc.poll() is not None or time.time() > deadline:
            proc.kill()
            pytest.fail(str(proc.communicate()))
        time.sleep(0.5)
    return proc


@pytest.mark.parametrize("to_group", [True, False])
def test_a_stop_signal_stops_the_suite_after_the_runs_checkpoint_without_a_result(
        tmp_path, to_group):
    # The suite killed its run on Ctrl-C (subprocess.call on KeyboardInterrupt), before the
    # run could checkpoint; and a run stopped by a signal exits 0, which the suite took for
    # a finished run: it summarised the partial run as the result and went on. A SIGTERM to
    # the suite's pid alone did not reach the run, which went on to its end.
    proc = _suite_until_first_checkpoint(tmp_path)
    try:
        if to_group:
            os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C: the terminal signals the whole group
        else:
            os.kill(proc.pid, signal.SIGTERM)  # `kill PID`
        out, err = proc.communicate(timeout=120)  # a run to its end takes far longer
    finally:
        proc.kill()
        _kill_runs(tmp_path)
    assert proc.returncode == 0, err
    name = "SIGINT" if to_group else "SIGTERM"
    assert "Traceback" not in err and f"{name} received" in out + err, (out, err)
    assert (out + err).count("received") == 1, (out, err)  # once: not aborted by a second
    seed0 = tmp_path / "Breakout" / "seed0"
    assert out.strip().splitlines()[-1].startswith(
        f"[suite] stopped by signal: the run of Breakout seed 0 in {seed0} was stopped at "), out
    assert "of 400,000 frames, checkpoint written; start the suite again to resume it" in out
    assert not list(tmp_path.glob("Breakout/seed*/suite_result.json"))
    assert not (tmp_path / "Breakout" / "seed1").exists()  # the next run did not start
    assert not (tmp_path / "results.csv").exists()
    from rlf.trainers.run_dir import checkpointed_env_steps
    assert 0 < checkpointed_env_steps(seed0) < 100_000


# The suite blocks the stop signals in its main thread while it forks the run; the kernel then
# hands a process-directed signal to another thread, and Python runs the handler in the main
# thread as soon as it can: here, before Popen returns. The helper thread is started before
# the block, so it does not inherit it and takes the signal.
_SIGNAL_AS_THE_RUN_STARTS = """
import os, signal, subprocess, sys, threading
from pathlib import Path
from rlf.bin import suite
go = threading.Event()
helper = threading.Thread(target=lambda: (go.wait(), os.kill(os.getpid(), signal.SIGTERM)))
helper.start()
real_popen = subprocess.Popen
def popen(*args, **kwargs):
    go.set()
    helper.join()
    return real_popen(*args, **kwargs)
suite.subprocess.Popen = popen
tiny = [b for i, b in enumerate(sys.argv[2:]) if i % 2]
try:
    suite.train_one("confs/impala_atari_sync.gin", Path(sys.argv[1]), "Breakout", 0, 400_000,
                    4, tiny)
except suite.SuiteStopped as e:
    print("stopped:", e)
"""


def test_a_stop_signal_as_the_run_starts_is_forwarded(tmp_path):
    # The handler ran before the run had a pid and forwarded nothing: the run went on to its
    # end. Sent once the run has its pid, the signal reaches it before it sets its SIGTERM
    # handler; it dies of it, and the suite reports a stop (no result), not the run's error.
    proc = subprocess.Popen([sys.executable, "-c", _SIGNAL_AS_THE_RUN_STARTS, str(tmp_path),
                             *TINY], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=120)  # the run to its end takes far longer
    finally:
        proc.kill()
        _kill_runs(tmp_path)
    assert proc.returncode == 0, err
    assert out.strip().splitlines()[-1] == (
        f"stopped: the run of Breakout seed 0 in {tmp_path} was stopped by SIGTERM without "
        f"a checkpoint at the stop (it was killed by signal SIGTERM); it has no checkpoint yet; "
        f"start the suite again to resume it"), out
    assert not (tmp_path / "suite_result.json").exists()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG")
def test_a_killed_suite_stops_its_run_with_a_checkpoint(tmp_path):
    # The run has its own session (so that a signal reaches it once); a suite killed
    # outright must not leave it training on its own.
    from rlf.trainers.run_dir import checkpointed_env_steps
    proc = _suite_until_first_checkpoint(tmp_path)
    seed0 = tmp_path / "Breakout" / "seed0"
    try:
        assert len(_runs_of(seed0)) == 1
        first = checkpointed_env_steps(seed0)
        proc.kill()
        out, err = proc.communicate(timeout=120)  # the run holds the pipes until it exits
        assert "SIGTERM received" in out + err, (out, err)
        deadline = time.time() + 30
        while _runs_of(seed0):
            assert time.time() < deadline, "the run goes on without its suite"
            time.sleep(0.2)
    finally:
        proc.kill()
        _kill_runs(tmp_path)
    assert checkpointed_env_steps(seed0) > first  # the checkpoint written on SIGTERM


def test_a_failing_run_stops_the_suite_with_its_status(tmp_path):
    r = _suite(tmp_path, "--conf_param", "TrainerConfig.checkpoint_interval=0")
    assert r.returncode == 2
    assert r.stderr.strip().splitlines()[-1].startswith(
        "error: the run of Breakout seed 0 in ")
    assert not (tmp_path / "results.csv").exists()


def test_an_unknown_game_is_refused_before_any_run_starts(tmp_path):
    r = subprocess.run(
        [sys.executable, "-m", "rlf.bin.suite", "--conf", "confs/impala_atari_sync.gin",
         "--games", "Breakout,Pongg", "--seeds", "0", "--frames", "4000", "--root_dir",
         str(tmp_path / "suite"), *TINY], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == [r.stderr.strip()]  # one line
    assert r.stderr.startswith("error: Unknown environment id 'ALE/Pongg-v5'")
    assert "'ALE/Pong-v5'" in r.stderr  # the closest ids
    assert not (tmp_path / "suite").exists()  # Breakout did not run first
    r = _suite(tmp_path / "suite", "--conf_param", "ImpalaAlgorithm.gama=0.9")
    assert r.returncode == 2 and r.stderr.strip() == (
        "error: ImpalaAlgorithm has no parameter 'gama' (closest: gamma, lambda_, name)")
    assert not (tmp_path / "suite").exists()


@pytest.mark.parametrize("conf, extra, message", [
    ("confs/ppo_cartpole.gin", [],
     "error: --conf confs/ppo_cartpole.gin trains 'CartPole-v1', not an Atari game"),
    ("confs/impala_atari_sync.gin", ["--conf_param", "load.env_name='ALE/Qbert-v5'"],
     "error: --conf_param 'load.env_name='ALE/Qbert-v5'': the suite sets load.env_name "
     "itself, from --games"),
    ("confs/impala_atari_sync.gin", ["--conf_param", "TrainerConfig.random_seed=3"],
     "error: --conf_param 'TrainerConfig.random_seed=3': the suite sets "
     "TrainerConfig.random_seed itself, from --seeds"),
    ("confs/impala_atari_sync.gin", ["--seeds", "0,-1"],
     "error: --seeds ['0', '-1']: seeds must be in [0, 2**30) (TrainerConfig.random_seed)"),
    # A run given twice was run once and counted twice in the means over seeds.
    ("confs/impala_atari_sync.gin", ["--seeds", "0", "1", "0"],
     "error: --seeds 0, 1, 0: 0 given more than once"),
    ("confs/impala_atari_sync.gin", ["--games", "Pong,Breakout,Pong"],
     "error: --games Pong, Breakout, Pong: Pong given more than once"),
    # An empty list was a traceback after every run, where results.csv was written.
    ("confs/impala_atari_sync.gin", ["--seeds="],
     "error: --seeds is empty: give at least one value"),
    ("confs/impala_atari_sync.gin", ["--games", "--seeds", "0"],
     "error: --games is empty: give at least one value"),
    # Path('') is the current directory: the runs and tables went there.
    ("confs/impala_atari_sync.gin", ["--games", "Pongg", "--root_dir", ""],
     "error: --root_dir is empty: give a directory (default runs/suite)"),
    ("confs/impala_atari_sync.gin", ["--conf_param", "load_atari.frameskip=3"],
     "error: --conf confs/impala_atari_sync.gin binds load_atari.frameskip = 3 but "
     "--frameskip is 4: give --frameskip 3"),
])
def test_a_conf_the_suite_cannot_run_is_refused_before_any_run_starts(tmp_path, conf, extra,
                                                                     message):
    # A CartPole conf would train its MLP on Pong's frames; a binding of the game or the seed
    # would silently replace the suite's own (later bindings win); a frameskip other than
    # --frameskip would miscount the frames.
    root = tmp_path / "suite"
    r = subprocess.run(
        [sys.executable, "-m", "rlf.bin.suite", "--conf", conf, "--games", "Pong", "--frames",
         "4000", "--root_dir", str(root), *extra], cwd=REPO, capture_output=True, text=True,
        timeout=600)
    assert r.returncode == 2 and r.stderr.strip().splitlines() == [r.stderr.strip()], r.stderr
    assert r.stderr.startswith(message), r.stderr
    assert not root.exists()


@pytest.mark.one_worker  # starts Ray
def test_the_suite_on_tune_runs_parallel_trials_into_the_same_layout_and_tables(tmp_path):
    pytest.importorskip("ray.tune")
    r = _suite(tmp_path / "tune", "--backend", "tune", "--max_concurrent", "2")
    assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
    assert "2 runs as Ray Tune trials (2 at once)" in r.stdout
    for seed in (0, 1):  # each run where the sequential backend puts it, with its result
        run = tmp_path / "tune" / "Breakout" / f"seed{seed}"
        assert (run / "config.gin").is_file() and (run / "suite_result.json").is_file()
    table = list(csv.DictReader(open(tmp_path / "tune" / "results.csv")))
    assert [row["seed"] for row in table] == ["0", "1"]
    assert all(int(row["frames"]) >= 4000 for row in table)
    assert (tmp_path / "tune" / "Breakout.png").is_file()
    # rlf.bin.compare reads the experiment's directory as a suite's
    pytest.importorskip("rliable")
    (tmp_path / "other").mkdir()
    shutil.copy(tmp_path / "tune" / "results.csv", tmp_path / "other" / "results.csv")
    r = subprocess.run([sys.executable, "-m", "rlf.bin.compare", str(tmp_path / "tune"),
                        str(tmp_path / "other"), "--reps", "100", "--out",
                        str(tmp_path / "cmp")], cwd=REPO,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and f"| {tmp_path / 'tune'} | 2 x 1 |" in r.stdout, r.stderr
    # started again: both finished, nothing runs
    r = _suite(tmp_path / "tune", "--backend", "tune")
    assert r.returncode == 0 and r.stdout.count("finished, skipped") == 2


@pytest.mark.one_worker  # starts Ray
def test_a_suite_on_tune_stopped_while_a_run_waits_lists_it_and_stops_cleanly(tmp_path):
    # The waiting trial's result had no config, and writing trials.csv ended in a KeyError
    # on the game: a traceback instead of the stop message, and no trials.csv.
    pytest.importorskip("ray.tune")
    root = tmp_path / "tune"
    proc = subprocess.Popen(
        [sys.executable, "-m", "rlf.bin.suite", "--conf", "confs/impala_atari_sync.gin",
         "--games", "Breakout", "--seeds", "0,1", "--frames", "400k", "--root_dir", str(root),
         "--backend", "tune", "--num_cpus", "1", *TINY], cwd=REPO, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        deadline = time.time() + 300
        while not list(root.glob("Breakout/seed0/ckpt/ckpt-*.pt")):
            assert proc.poll() is None and time.time() < deadline, proc.communicate()[0]
            time.sleep(0.5)
        os.kill(proc.pid, signal.SIGTERM)
        out = proc.communicate(timeout=180)[0]
    finally:
        proc.kill()
        _kill_runs(root)
    assert proc.returncode == 0 and not _raised(out), out[-3000:]
    assert "(as many as the CPUs allow at once)" in out  # one CPU: one trial at a time
    assert f"the run of Breakout seed 0 in {root / 'Breakout' / 'seed0'} stopped at " in out
    rows = {r["run_dir"]: r for r in csv.DictReader(open(root / "trials.csv"))}
    assert set(rows) == {str(root / "Breakout" / "seed0"), str(root / "Breakout" / "seed1")}
    # seed 1 never started (seed 0 may have reported to Tune or not: STOPPED or PENDING)
    assert rows[str(root / "Breakout" / "seed1")]["status"] == "PENDING", rows
    assert not (root / "Breakout" / "seed1").exists()


def test_tune_settings_without_the_tune_backend_are_refused(tmp_path):
    for flag in ("--max_concurrent", "--num_cpus"):
        r = _suite(tmp_path, flag, "2")
        assert r.returncode == 2
        assert r.stderr.strip() == ("error: --max_concurrent, --num_cpus and --address are "
                                    "settings of --backend tune, which runs the suite on Ray "
                                    "Tune: add --backend tune")
