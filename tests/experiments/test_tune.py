"""Experiments on a real local Ray (2 CPUs): a trial is the run outside Tune, PBT clones exact
checkpoints and keeps the mutated values, ASHA ranks by the runs' own metrics, and an
experiment of each scheduler stopped or killed resumes without restarting a trial."""

import csv
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("ray.tune")

from rlf.experiments.clone import read_lineage, state_digest  # noqa: E402
from rlf.experiments.runner import TUNE_DIR, ExperimentOptions, run_experiment  # noqa: E402
from rlf.experiments.space import SearchSpace  # noqa: E402
from rlf.experiments.tune_state import SET_ASIDE, check_tune_state  # noqa: E402
from rlf.utils.errors import UserError  # noqa: E402
from rlf.utils.tensorboard_reader import read_scalar_tags  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
SHORT = ["TrainerConfig.num_env_steps=0", "TrainerConfig.evaluate=False",
         "TrainerConfig.summary_interval=1"]


@pytest.fixture(scope="module")
def ray_cluster():
    import ray
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


def _scalars(run_dir: Path) -> dict:
    """Every scalar series of a run but the wall times and the experiment's own tags."""
    return {t: list(zip(s, v)) for t, (s, v, _) in read_scalar_tags(run_dir / "train").items()
            if not t.startswith(("time/", "Experiment/"))}


def _train(conf, root, bindings):
    cmd = [sys.executable, "-m", "rlf.bin.train", "--conf", conf, "--root_dir", str(root),
           "--noprogress"] + [a for b in bindings for a in ("--conf_param", b)]
    r = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]


@pytest.mark.parametrize("conf, params, step", [
    # steps of environment steps (256 per iteration here)
    ("confs/ppo_cartpole.gin", ["TrainerConfig.num_iterations=6"], dict(step_env_steps=600)),
    # the reproducible actor mode: one actor process, fixed lag
    ("confs/dqn_cartpole.gin", ["TrainerConfig.num_iterations=12", "TrainerConfig.unroll_length=16",
                                "TrainerConfig.num_updates_per_train_iter=4",
                                "TrainerConfig.async_unroll=True",
                                "TrainerConfig.initial_collect_steps=64"],
     dict(step_iterations=4)),
], ids=["sync", "actors"])
def test_a_grid_trial_writes_the_scalars_of_the_run_outside_tune(ray_cluster, tmp_path, conf,
                                                                 params, step):
    params = SHORT + params
    rows = run_experiment(ExperimentOptions(
        conf=conf, root_dir=str(tmp_path / "exp"), conf_params=params,
        space=SearchSpace.from_flags(seeds=[3]), **step), verbose=0)
    assert [r["status"] for r in rows] == ["FINISHED"]
    trial = Path(rows[0]["run_dir"])
    assert trial.parent == tmp_path / "exp" and (trial / "config.gin").is_file()
    _train(conf, tmp_path / "alone", params + ["TrainerConfig.random_seed=3"])
    inside, outside = _scalars(trial), _scalars(tmp_path / "alone")
    assert "Metrics/AverageReturn" in inside
    assert inside == outside


def _check_clones(root):
    """Every PBT clone in the experiment at ``root`` restored its source's checkpoint exactly
    and kept its own mutated learning rate; a clone is an ordinary run (played, its lineage in
    TensorBoard)."""
    # Every checkpoint Tune kept, by (run directory, iteration).
    saved = {}
    for info_file in (root / TUNE_DIR).glob("*/checkpoint_*/rlf_checkpoint.json"):
        info = json.loads(info_file.read_text())
        saved[(info["run_dir"], info["iteration"])] = info_file.parent
    events = [e for d in root.iterdir() if d.is_dir() and d.name != TUNE_DIR
              for e in read_lineage(d)["events"]]
    assert events, "no trial cloned another"
    import torch
    for event in events:
        assert event["kind"] == "clone" and event["source_run_dir"]
        source = saved[(event["source_run_dir"], event["source_iteration"])]
        checkpoint = torch.load(source / f"ckpt-{event['source_iteration']}.pt",
                                weights_only=False)
        restored = event["restored"]
        # parameters, counters and environment steps of the source
        assert restored["digest"] == state_digest(checkpoint["algorithm"])
        assert restored["iteration"] == checkpoint["trainer"]["iter_num"]
        assert restored["env_steps"] == checkpoint["trainer"]["env_steps"]
        # the clone's own (mutated) learning rate, not the source's
        (binding,) = event["bindings"]
        mutated = float(binding.split("=")[1])
        assert restored["lr"] == [[pytest.approx(mutated, rel=1e-12)]]
        source_lr = checkpoint["algorithm"]["_optimizers"][0]["param_groups"][0]["lr"]
        if source_lr != pytest.approx(mutated, rel=1e-12):
            assert event["changed"]
        # the run goes on from there: its TensorBoard has the lineage
    clone_dir = next(d for d in root.iterdir() if d.is_dir() and read_lineage(d)["events"])
    # a PBT trial is an ordinary run: rlf.bin.play plays its policy
    r = subprocess.run([sys.executable, "-m", "rlf.bin.play", "--root_dir", str(clone_dir),
                        "--num_episodes", "1"], cwd=REPO, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0 and "average return" in r.stdout, r.stderr[-2000:]
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    acc = EventAccumulator(str(clone_dir / "train"), size_guidance={"tensors": 0})
    acc.Reload()
    assert "Experiment/lineage/text_summary" in acc.Tags()["tensors"]


def test_asha_ranks_trials_by_the_metric_their_runs_summarise(ray_cluster, tmp_path):
    root = tmp_path / "asha"
    rows = run_experiment(ExperimentOptions(
        conf="confs/ppo_cartpole.gin", root_dir=str(root),
        conf_params=SHORT + ["TrainerConfig.num_iterations=8"],
        space=SearchSpace.from_flags(grids=["torch.optim.Adam.lr=[1e-5, 1e-4, 1e-3, 3e-3]"]),
        scheduler="asha", metric="AverageReturn", grace_period=1, reduction_factor=2,
        step_iterations=2), verbose=0)
    assert len(rows) == 4
    stopped = [r for r in rows if r["iterations"] < 8]
    assert stopped, "ASHA stopped no trial"
    for row in rows:
        result = [json.loads(line) for line in
                  (root / TUNE_DIR / row["trial"] / "result.json").read_text().splitlines()]
        steps, values, _ = read_scalar_tags(Path(row["run_dir"]) / "train",
                                            ["Metrics/AverageReturn"])["Metrics/AverageReturn"]
        summarised = dict(zip(steps, values))
        for r in result:  # each reported value is the one the run summarised at that iteration
            assert r["AverageReturn"] == pytest.approx(summarised[r["iterations"]], rel=1e-6)


def test_a_tune_state_cut_short_by_a_killed_driver_is_set_aside_or_refused(ray_cluster,
                                                                           tmp_path):
    # Killed while Tune copied its state, a driver left the search algorithm's file empty;
    # Tune's resume then failed and started the experiment anew: one trial without the
    # experiment's values, in a new run directory.
    root = tmp_path / "grid"
    options = ExperimentOptions(
        conf="confs/ppo_cartpole.gin", root_dir=str(root),
        conf_params=SHORT + ["TrainerConfig.num_iterations=2"],
        space=SearchSpace.from_flags(grids=["torch.optim.Adam.lr=[1e-4, 1e-3]"]),
        step_iterations=2)
    first = run_experiment(options, verbose=0)
    runs = sorted(d.name for d in root.iterdir())
    (searcher,) = (root / TUNE_DIR).glob("basic-variant-state-*.json")
    searcher.write_bytes(b"")  # as the killed copy left it
    # with a trial not created yet the resume cannot go on: refused, nothing renamed
    with pytest.raises(UserError, match=r"search state .* cannot be read .* 1 of the "
                                        r"experiment's 3 trials are not created yet"):
        check_tune_state(root / TUNE_DIR, 3)
    assert searcher.is_file()
    # every trial exists: the resume goes on without it, the same trials and run directories
    rows = run_experiment(options, verbose=0)
    assert [(r["trial"], r["status"], r["iterations"]) for r in rows] == \
        [(r["trial"], r["status"], r["iterations"]) for r in first]
    assert sorted(d.name for d in root.iterdir()) == runs
    # (kept; in this process Tune may copy its own staging copy back under the old name)
    assert searcher.with_name(searcher.name + SET_ASIDE).stat().st_size == 0
    # an experiment state cut short: refused in one line
    state = max((root / TUNE_DIR).glob("experiment_state-*.json"))
    state.write_text(state.read_text()[:100])
    with pytest.raises(UserError, match=r"experiment state .* cannot be read"):
        run_experiment(options, verbose=0)


def _tune_command(root):
    return [sys.executable, "-m", "rlf.bin.tune", "--conf", "confs/ppo_cartpole.gin",
            "--root_dir", str(root), "--grid", "TrainerConfig.num_iterations=[4, 80]",
            "--step_iterations", "2", "--checkpoint_every", "1", "--num_cpus", "2",
            "--conf_param", "TrainerConfig.num_env_steps=0",
            "--conf_param", "TrainerConfig.evaluate=False"]


class _Driver:
    """A ``rlf.bin.tune`` driver in its own process group, its stdout and stderr in a file.

    A file, not a pipe read by a thread: once the driver has exited the file holds all it
    wrote, with no reader to wait for (a driver's last lines once went missing from a pipe).
    """

    def __init__(self, cmd, log: Path, env):
        self._log = log
        with open(log, "w") as f:
            self.process = subprocess.Popen(cmd, cwd=REPO, stdout=f, stderr=subprocess.STDOUT,
                                            text=True, start_new_session=True, env=env)

    def output(self) -> str:
        return self._log.read_text(errors="replace")


def _wait_for(predicate, process, seconds=300, output=lambda: ""):
    deadline = time.time() + seconds
    while time.time() < deadline and process.poll() is None and not predicate():
        time.sleep(0.5)
    assert process.poll() is None, \
        f"the experiment ended before the test could stop it: {output()[-3000:]}"


def test_an_experiment_stopped_or_killed_resumes_without_restarting_a_trial(tmp_path):
    root = tmp_path / "exp"
    env = dict(os.environ, RAY_DEDUP_LOGS="0")
    short = root / "00000_num_iterations=4"
    long_ = root / "00001_num_iterations=80"

    def start(name):
        return _Driver(_tune_command(root), tmp_path / f"{name}.log", env)

    def tune_checkpoints():
        return len(list((root / TUNE_DIR).glob(f"{long_.name}/checkpoint_*")))

    def newest(run):
        return max([int(p.stem.split("-")[1]) for p in (run / "ckpt").glob("ckpt-*.pt")],
                   default=0)

    # SIGTERM: every running trial stops with a checkpoint, and the driver exits with 0
    first = start("first")
    _wait_for(lambda: (root / TUNE_DIR / short.name / "result.json").is_file()
              and (short / "ckpt" / "ckpt-4.pt").is_file() and tune_checkpoints() >= 1,
              first.process, output=first.output)
    time.sleep(2)  # the finished trial's end reaches Tune's experiment state
    first.process.send_signal(signal.SIGTERM)
    first.process.wait(timeout=120)
    out = first.output()
    assert first.process.returncode == 0, out[-3000:]
    assert "[tune] stopped: 1 of 2 trials unfinished" in out, out[-3000:]
    stopped_at = newest(long_)
    finished_files = {p: p.stat().st_mtime_ns for p in short.rglob("*") if p.is_file()}
    # started again, then SIGKILL of the driver and its process group
    second = start("second")
    resumed = f"Resuming from iteration {stopped_at} "  # the checkpoint written at the stop
    _wait_for(lambda: newest(long_) >= stopped_at + 6 and resumed in second.output(),
              second.process, output=second.output)
    os.killpg(second.process.pid, signal.SIGKILL)
    second.process.wait()
    out = second.output()
    assert resumed in out
    # started again: it finishes
    r = subprocess.run(_tune_command(root), cwd=REPO, capture_output=True, text=True,
                       timeout=600, env=env)
    assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
    out += r.stdout + r.stderr
    assert "resuming the experiment" in out
    assert "Starting a new run" not in out  # no trial from step 0
    assert "Resuming from iteration" in r.stdout
    # the finished trial was not run again
    assert {p: p.stat().st_mtime_ns for p in short.rglob("*") if p.is_file()} == finished_files
    rows = {r["trial"]: r for r in csv.DictReader(open(root / "trials.csv"))}
    assert rows[short.name]["iterations"] == "4" and rows[long_.name]["iterations"] == "80"
    assert {r["status"] for r in rows.values()} == {"FINISHED"}


def _resumes_after(signum, scheduler_flags, root, stop_when, iterations=12):
    """Starts ``rlf.bin.tune`` with ``scheduler_flags``, sends ``signum`` to the driver (to its
    process group for SIGKILL, as a shell's kill of the job) once ``stop_when(output)`` holds
    for the driver's output so far, then starts the same command again: it must finish every
    trial without starting a run anew. A SIGKILL that cut Tune's experiment state short is
    tried once more from the start.

    Returns:
        The rows of ``trials.csv`` and the drivers' output.
    """
    env = dict(os.environ, RAY_DEDUP_LOGS="0")
    cmd = [sys.executable, "-m", "rlf.bin.tune", "--conf", "confs/ppo_cartpole.gin",
           "--root_dir", str(root), "--step_iterations", "2", "--num_cpus", "2",
           "--conf_param", "TrainerConfig.num_env_steps=0",
           "--conf_param", "TrainerConfig.evaluate=False",
           "--conf_param", f"TrainerConfig.num_iterations={iterations}", *scheduler_flags]
    for attempt in range(2):
        r, first_out = _stop_and_restart(cmd, signum, root, stop_when, env)
        out = r.stdout + r.stderr
        # A SIGKILL that lands while Tune writes its experiment state (not atomically) cuts it
        # short, and the resume is refused as documented (test_a_tune_state_cut_short_...):
        # then the experiment runs again, to be killed at another moment.
        if not (signum == signal.SIGKILL and r.returncode == 2 and attempt == 0
                and "its driver was killed while writing it" in out):
            break
        shutil.rmtree(root)
    assert r.returncode == 0, out[-3000:]
    assert "resuming the experiment" in out and "Resuming from iteration" in out
    assert "Starting a new run" not in out, out[-3000:]
    rows = list(csv.DictReader(open(root / "trials.csv")))
    assert rows
    return rows, first_out + out


def _stop_and_restart(cmd, signum, root, stop_when, env):
    """``_resumes_after``'s driver, stopped by ``signum``, and the same command again.

    Returns:
        The second driver's ``CompletedProcess`` and the first's output.
    """
    first = _Driver(cmd, root.parent / f"{root.name}-first.log", env)
    _wait_for(lambda: stop_when(first.output()), first.process, output=first.output)
    if signum == signal.SIGKILL:
        os.killpg(first.process.pid, signal.SIGKILL)
    else:
        first.process.send_signal(signum)
    first.process.wait(timeout=180)
    first_out = first.output()
    if signum != signal.SIGKILL:
        assert first.process.returncode == 0, first_out[-3000:]
        assert "[tune] stopped:" in first_out, first_out[-3000:]
    # The same command again: it ends (a hung scheduler would wait for ever) with every trial
    # continued from its checkpoint.
    r = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=400, env=env)
    return r, first_out


def _tune_checkpoints(root, at_least):
    """Whether every trial of the experiment has ``at_least`` Tune checkpoints."""
    trials = [d for d in (root / TUNE_DIR).glob("0*") if d.is_dir()]
    return len(trials) >= 2 and all(
        len(list(d.glob("checkpoint_*"))) >= at_least for d in trials)


def test_pbt_resumes_after_ctrl_c_past_its_first_perturbation(tmp_path):
    # Ray's synchronous PBT, resumed, waited for ever at its first synchronisation point.
    root = tmp_path / "pbt"
    rows, out = _resumes_after(signal.SIGINT, [
        "--sample", "torch.optim.Adam.lr=loguniform(1e-4, 1e-2)", "--num_samples", "2",
        "--scheduler", "pbt", "--metric", "AverageReturn", "--perturbation_interval", "1",
        "--quantile_fraction", "0.5", "--conf_param", "PPOAlgorithm.lr_scheduler=None"], root,
        # Stopped once PBT has perturbed a trial and every trial has a checkpoint, early in its
        # six steps. Not at a count of checkpoints: a trial PBT keeps cloning into saves one
        # only when it is not cloned, so two may come only with its last step.
        lambda out: "[Explore]" in out and _tune_checkpoints(root, 1), iterations=12)
    assert {r["status"] for r in rows} == {"FINISHED"}
    assert {r["iterations"] for r in rows} == {"12"}
    _check_clones(root)
    # a clone states the learning rate it goes on with (it said the checkpoint's stayed)
    assert "the configured optimizer settings replace the checkpoint's: optimizer 0" in out
    assert "goes on with the checkpoint's" not in out


def test_asha_resumes_after_the_driver_is_killed(tmp_path):
    root = tmp_path / "asha"
    rows, out = _resumes_after(signal.SIGKILL, [
        "--grid", "torch.optim.Adam.lr=[1e-5, 3e-3]", "--scheduler", "asha",
        "--metric", "AverageReturn", "--grace_period", "2", "--checkpoint_every", "1"], root,
        lambda out: _tune_checkpoints(root, 2), iterations=40)
    # the trial ASHA stops early is a finished trial too, not one left to resume: each ends
    # at its 40 iterations or is early-stopped before (ASHA's cut-off at a rung depends on the
    # order in which the trials report there, so both may be stopped)
    assert {r["status"] for r in rows} <= {"FINISHED", "EARLY_STOPPED"}, rows
    assert all((r["status"] == "FINISHED") == (r["iterations"] == "40")
               and int(r["iterations"]) <= 40 for r in rows), (rows, out[-3000:])
