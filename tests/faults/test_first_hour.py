"""The mistakes of a newcomer's first hour, each one line with exit status 2 (130 for
Ctrl-C) before anything is written, with nothing left behind and nothing good changed."""

import os
import re
import shutil
import signal
import subprocess
import sys
import time

import pytest

from tests.faults._cli import CARTPOLE, REPO, lines, run_cli, sha256

#: (case, tool, arguments ({tmp}: the test's directory, {file}: a file of the user's),
#:  the line on stderr (a regular expression), what must not exist afterwards)
CASES = [
    ("train_root_dir_cannot_be_made", "train", [*CARTPOLE, "--root_dir", "/proc/rlf-run"],
     r"error: (--)?root_dir /proc/rlf-run cannot be (created|written)", "/proc/rlf-run"),
    ("train_root_dir_cannot_be_made_two_learners", "train",
     [*CARTPOLE, "--root_dir", "/proc/rlf-run", "--conf_param", "TrainerConfig.num_learners=2",
      "--conf_param", "load.num_envs=4"],
     r"error: (--)?root_dir /proc/rlf-run cannot be (created|written)", "/proc/rlf-run"),
    ("tune_root_dir_is_a_file", "tune",
     ["--conf", "confs/ppo_cartpole.gin", "--root_dir", "{file}", "--seeds", "0,1"],
     r"error: root_dir {file} is a file, not a directory", None),
    ("play_misspelt_binding", "play",
     ["--root_dir", "{run}", "--num_episodes", "1", "--conf_param", "load.num_env=2"],
     r"error: cannot create the environment \(.*unexpected keyword argument 'num_env'", None),
    ("tune_games_on_a_cartpole_conf", "tune",
     ["--conf", "confs/ppo_cartpole.gin", "--root_dir", "{tmp}/exp", "--games",
      "Pong,Breakout", "--seeds", "0"],
     r"error: --conf confs/ppo_cartpole.gin trains 'CartPole-v1', not an Atari game, and the "
     r"trials would run its network and settings on ALE/Pong-v5", "{tmp}/exp"),
    ("tune_misspelt_metric", "tune",
     ["--conf", "confs/ppo_cartpole.gin", "--root_dir", "{tmp}/exp", "--scheduler", "asha",
      "--metric", "AverageRetrun", "--grid", "torch.optim.Adam.lr=[1e-3, 3e-4]"],
     r"error: --metric 'AverageRetrun': a trial reports AverageReturn, .*did you mean "
     r"AverageReturn\?", "{tmp}/exp"),
    ("tune_score_without_atari", "tune",
     ["--conf", "confs/ppo_cartpole.gin", "--root_dir", "{tmp}/exp", "--scheduler", "asha",
      "--metric", "AverageEpisodeScore", "--grid", "torch.optim.Adam.lr=[1e-3, 3e-4]"],
     r"error: --metric AverageEpisodeScore: only Atari games report a score", "{tmp}/exp"),
    ("tune_mode_without_metric", "tune",
     ["--conf", "confs/ppo_cartpole.gin", "--root_dir", "{tmp}/exp", "--mode", "min"],
     r"error: --mode min takes effect only with --metric", "{tmp}/exp"),
    # refused before the actors start: no actor log in a run directory that is then removed
    ("unused_binding_with_actors", "train",
     [*CARTPOLE, "--root_dir", "{tmp}/run", "--conf_param", "TrainerConfig.async_unroll=True",
      "--conf_param", "load_atari.frame_stack=2"],
     r"error: load_atari.frame_stack = 2: no part of this run takes this binding", "{tmp}/run"),
    # an empty list ran one trial at the conf's seed
    ("tune_seeds_empty", "tune",
     ["--conf", "confs/ppo_cartpole.gin", "--root_dir", "{tmp}/exp", "--seeds", ""],
     r"error: --seeds '' names no seed; give one or more \(--seeds 0,1,2\), or leave the flag "
     r"out$", "{tmp}/exp"),
    ("train_conf_is_a_directory", "train", ["--conf", "confs", "--root_dir", "{tmp}/run"],
     r"error: conf file 'confs' is a directory; give one of its .gin files \(dqn_atari.gin, ",
     "{tmp}/run"),
    # the cause used to be the 4th of 14 differences in a line of 1,370 characters
    ("train_another_algorithms_conf_on_a_run", "train",
     ["--conf", "confs/dqn_cartpole.gin", "--root_dir", "{run}", "--noprogress"],
     r"error: {run} holds a run of another algorithm \(TrainerConfig.algorithm_ctor = "
     r"@DQNAlgorithm \(the run's: @ImpalaAlgorithm\)\), which cannot be resumed with this "
     r"conf; use another --root_dir, or the configuration it was written with", None),
    ("train_offline_data_is_a_policy_checkpoint", "train",
     ["--conf", "confs/dqn_cartpole.gin", "--root_dir", "{tmp}/off", "--noprogress",
      "--conf_param", "TrainerConfig.offline_buffer_dir='{run}/ckpt/ckpt-3.pt'",
      "--conf_param", "TrainerConfig.unroll_length=0",
      "--conf_param", "TrainerConfig.num_env_steps=0",
      "--conf_param", "TrainerConfig.num_iterations=2"],
     r"error: {run}/ckpt/ckpt-3.pt is a training checkpoint \(the policy and optimizers\), "
     r"not replay data; export a run's replay buffer as one file with python -m "
     r"rlf.bin.export_replay --root_dir RUN --out FILE", "{tmp}/off"),
    ("train_seed_flag_and_its_conf_param", "train",
     [*CARTPOLE, "--root_dir", "{tmp}/run", "--seed", "3", "--conf_param",
      "TrainerConfig.random_seed=4"],
     r"error: --seed 3 and --conf_param 'TrainerConfig.random_seed=4' both set "
     r"TrainerConfig.random_seed: give one of them$", "{tmp}/run"),
    ("train_steps_flag_and_a_run_length_conf_param", "train",
     [*CARTPOLE, "--root_dir", "{tmp}/run", "--steps", "300"],
     r"error: --steps 300 and --conf_param 'TrainerConfig.num_env_steps=0' both set "
     r"TrainerConfig.num_env_steps: give one of them$", "{tmp}/run"),
    ("train_root_dir_with_an_unset_variable", "train",
     [*CARTPOLE, "--root_dir", "$RLF_UNSET_VARIABLE/run"],
     r"error: --root_dir \$RLF_UNSET_VARIABLE/run: the environment variable "
     r"RLF_UNSET_VARIABLE is not set; set it or give the path itself$", None),
    ("compare_a_directory_that_does_not_exist", "compare", ["{tmp}/nope", "{run}"],
     r"error: {tmp}/nope: no such directory; give finished suites' or runs' directories",
     "compare"),
]


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory):
    """A 3-iteration CartPole run to play and resume."""
    root = tmp_path_factory.mktemp("first_hour") / "run"
    r = run_cli("train", *CARTPOLE, "--root_dir", str(root))
    assert r.returncode == 0, r.stderr[-2000:]
    return root


# (a case of several learners runs on the worker of those that start learners: conftest.py)
PARAMS = [pytest.param(*c, id=c[0], marks=[pytest.mark.one_worker] if "learners" in c[0] else [])
          for c in CASES]


@pytest.mark.parametrize("case, tool, args, line, absent", PARAMS)
def test_a_first_hour_mistake_is_one_line_and_leaves_nothing(trained_run, tmp_path, case, tool,
                                                             args, line, absent):
    if tool == "tune":
        pytest.importorskip("ray.tune", reason="rlf.bin.tune needs the tune extra")
    if tool == "compare":
        pytest.importorskip("rliable", reason="rlf.bin.compare needs the suite extra")
    a_file = tmp_path / "a_file"
    a_file.write_text("mine")
    fill = dict(tmp=tmp_path, file=a_file, run=trained_run)
    run_files = {p: sha256(p) for p in trained_run.rglob("*") if p.is_file()}
    r = run_cli(tool, *[a.format(**fill) for a in args])
    assert r.returncode == 2, r.stderr[-3000:]
    assert len(lines(r.stderr)) == 1, r.stderr[-3000:]
    assert re.match(line.format(**{k: re.escape(str(v)) for k, v in fill.items()}),
                    lines(r.stderr)[0]), r.stderr
    if absent:
        assert not os.path.exists(absent.format(**fill))
    assert a_file.read_text() == "mine"
    assert {p: sha256(p) for p in trained_run.rglob("*") if p.is_file()} == run_files


def test_a_resume_with_a_learning_rate_the_checkpoint_overrides_is_refused(trained_run,
                                                                          tmp_path):
    # torch restores the checkpoint's learning rate with the optimizer: the new one would do
    # nothing, and config.gin would have named it.
    run = tmp_path / "run"
    subprocess.run(["cp", "-r", str(trained_run), str(run)], check=True)
    before = {p: sha256(p) for p in run.rglob("*") if p.is_file()}
    r = run_cli("train", *CARTPOLE, "--root_dir", str(run),
                "--conf_param", "TrainerConfig.num_iterations=5",
                "--conf_param", "torch.optim.Adam.lr=0.5")
    assert r.returncode == 2 and len(lines(r.stderr)) == 1, r.stderr[-3000:]
    assert lines(r.stderr)[0].startswith(
        "error: ImpalaAlgorithm's checkpoint has optimizer 0 (Adam): lr = "), r.stderr
    assert "(configured: 0.5)" in r.stderr and "Adam.lr = 0.5 (the run's: " in r.stderr
    assert {p: sha256(p) for p in run.rglob("*") if p.is_file()} == before


def test_the_short_flags_are_the_bindings_they_stand_for(tmp_path):
    r = run_cli("train", "--conf", "confs/impala_cartpole.gin", "--noprogress",
                "--conf_param", "TrainerConfig.evaluate=False", "--root_dir",
                str(tmp_path / "run"), "--seed", "5", "--env", "Acrobot-v1", "--steps", "300")
    assert r.returncode == 0, r.stderr[-3000:]
    config = (tmp_path / "run" / "config.gin").read_text().splitlines()
    for binding in ("TrainerConfig.random_seed = 5", "load.env_name = 'Acrobot-v1'",
                    "TrainerConfig.num_env_steps = 300", "TrainerConfig.num_iterations = 0"):
        assert binding in config, binding
    help_text = run_cli("train", "--helpshort").stdout
    assert "--seed" in help_text and "--env" in help_text and "--steps" in help_text


def test_a_tilde_in_root_dir_is_the_home_directory_not_a_folder_named_tilde(tmp_path):
    # quoted, no shell expands it: it made ./~/rlf_runs/x, which `rm -rf ~` would follow
    r = run_cli("train", *CARTPOLE, "--root_dir", "~/rlf_runs/x", HOME=str(tmp_path))
    assert r.returncode == 0, r.stderr[-3000:]
    assert f"Starting a new run in {tmp_path / 'rlf_runs' / 'x'}" in r.stdout
    assert (tmp_path / "rlf_runs" / "x" / "config.gin").is_file()
    assert not (REPO / "~").exists()


def test_play_record_where_no_file_can_be_made_is_refused_before_playing(trained_run):
    # /proc passes the access check; the whole episode used to be played before the failure
    r = run_cli("play", "--root_dir", str(trained_run), "--num_episodes", "1", "--record",
                "/proc/ep.gif")
    assert r.returncode == 2 and lines(r.stderr) == [
        "error: --record: video file /proc/ep.gif: the folder /proc takes no new file (No "
        "such file or directory)"], r.stderr[-2000:]
    assert "episode 0" not in r.stdout


def test_play_record_says_nothing_of_a_display(trained_run, tmp_path):
    # pygame's SDL printed "error: XDG_RUNTIME_DIR is invalid or not set" on every recording
    pytest.importorskip("pygame", reason="recording CartPole needs the play extra")
    environ = {k: v for k, v in os.environ.items() if k not in ("XDG_RUNTIME_DIR", "DISPLAY")}
    r = subprocess.run([sys.executable, "-m", "rlf.bin.play", "--root_dir", str(trained_run),
                        "--num_episodes", "1", "--record", str(tmp_path / "ep.gif")],
                       cwd=REPO, capture_output=True, text=True, timeout=180, env=environ)
    assert r.returncode == 0, r.stderr[-2000:]
    assert lines(r.stderr) == []
    assert (tmp_path / "ep.gif").stat().st_size > 0


def test_play_render_human_without_a_display_is_one_line(trained_run):
    environ = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    r = subprocess.run([sys.executable, "-m", "rlf.bin.play", "--root_dir", str(trained_run),
                        "--render", "human"], cwd=REPO, capture_output=True, text=True,
                       timeout=180, env=environ)
    assert r.returncode == 2 and lines(r.stderr) == [
        "error: --render human needs a display, and neither DISPLAY nor WAYLAND_DISPLAY is "
        "set; record the episode instead (--record episode.gif)"], r.stderr[-2000:]
    assert "episode 0" not in r.stdout


def test_play_render_human_shows_the_game_in_a_window(trained_run):
    """A real X server (Xvfb, .ci/run installs it) and pygame's X11 driver, forced: a window
    that could not be opened would fail the run."""
    pytest.importorskip("pygame", reason="the window needs the play extra")
    xvfb = shutil.which("Xvfb")
    if xvfb is None:
        pytest.skip("no Xvfb on this machine (apt-get install xvfb; .ci/run does)")
    number = next(n for n in range(90, 200) if not os.path.exists(f"/tmp/.X11-unix/X{n}")
                  and not os.path.exists(f"/tmp/.X{n}-lock"))
    server = subprocess.Popen([xvfb, f":{number}", "-screen", "0", "640x480x24", "-nolisten",
                               "tcp"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 30
        while not os.path.exists(f"/tmp/.X11-unix/X{number}") and time.time() < deadline:
            time.sleep(0.1)
        environ = {**os.environ, "DISPLAY": f":{number}", "SDL_VIDEODRIVER": "x11"}
        r = subprocess.run([sys.executable, "-m", "rlf.bin.play", "--root_dir",
                            str(trained_run), "--render", "human", "--num_episodes", "2",
                            "--fps", "1000"], cwd=REPO, capture_output=True, text=True,
                           timeout=180, env=environ)
    finally:
        server.terminate()
        server.wait(timeout=30)
    assert r.returncode == 0, r.stderr[-2000:]
    shown = int(re.search(r"^showed (\d+) frames in a window$", r.stdout, re.M).group(1))
    lengths = [int(n) for n in re.findall(r"^episode \d: return [\d.]+, length (\d+)$",
                                          r.stdout, re.M)]
    assert len(lengths) == 2 and shown >= sum(lengths)  # every step of both episodes


def _interrupt(args, when, group=False, sigint=signal.SIG_DFL):
    """Starts ``rlf.bin.train args`` (with SIGINT's disposition ``sigint``: ignored, as a
    shell script's ``cmd &`` starts it, or not, whatever this process's is) and sends it SIGINT
    once ``when()`` holds (to its whole process group, as a terminal's Ctrl-C, with
    ``group``); returns its exit status and stderr."""
    p = subprocess.Popen([sys.executable, "-m", "rlf.bin.train", *args], cwd=REPO,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         start_new_session=True,
                         preexec_fn=lambda: signal.signal(signal.SIGINT, sigint),
                         env={k: v for k, v in os.environ.items() if k != "RLF_DEBUG"})
    deadline = time.time() + 120
    while not when() and time.time() < deadline and p.poll() is None:
        time.sleep(0.05)
    if group:
        os.killpg(p.pid, signal.SIGINT)
    else:
        p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=120)
    return p.returncode, err


@pytest.mark.parametrize("sigint", [signal.SIG_DFL, signal.SIG_IGN], ids=["default", "ignored"])
def test_ctrl_c_while_starting_is_one_line_and_status_130(tmp_path, sigint):
    # Python printed a KeyboardInterrupt traceback from inside `import torch`. Started with
    # SIGINT ignored (a script's `cmd &`), the tool ignored it while it imported, and the
    # whole run went on; it took SIGINT once it had started.
    root = tmp_path / "run"
    started = time.time()
    status, err = _interrupt([*CARTPOLE, "--root_dir", str(root)],
                             lambda: time.time() > started + 0.3, sigint=sigint)
    assert status == 130, err
    assert lines(err) == ["aborted: stopped while starting; nothing was written"], err
    assert not root.exists()


@pytest.mark.one_worker
def test_ctrl_c_while_several_learners_start_is_one_line_and_status_130(tmp_path):
    # The launcher returned 0, with torch's launcher's warning, and left learners/ behind.
    root = tmp_path / "run"
    status, err = _interrupt([*CARTPOLE, "--root_dir", str(root), "--conf_param",
                              "TrainerConfig.num_learners=2", "--conf_param", "load.num_envs=4"],
                             lambda: (root / "learners").is_dir(), group=True)
    assert status == 130, err
    assert len(lines(err)) == 1 and lines(err)[0].startswith("aborted: "), err
    assert not root.exists()
