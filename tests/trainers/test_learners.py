"""Data-parallel learners: two gloo ranks on this machine against one learner with all the
environments, launched by ``rlf.bin.train`` and by ``torchrun`` (also as two "nodes" through a
c10d rendezvous on localhost); resume; a learner that dies; SIGTERM; refused settings."""

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from rlf.utils.tensorboard_reader import read_scalar_tags
from tests.faults._cli import REPO, run_cli

# IMPALA on CartPole: 16 environments, 8 per learner with two; 4 iterations of 2 updates.
IMPALA = ["--conf", "confs/impala_cartpole.gin", "--noprogress",
          "--conf_param", "TrainerConfig.evaluate=False",
          "--conf_param", "TrainerConfig.num_env_steps=0",
          "--conf_param", "TrainerConfig.summary_interval=1"]
# SAC on Pendulum: 4 environments; 10 updates of 64 sampled transitions after 200 steps.
SAC = ["--conf", "confs/sac_pendulum.gin", "--noprogress",
       "--conf_param", "TrainerConfig.evaluate=False",
       "--conf_param", "TrainerConfig.num_env_steps=0",
       "--conf_param", "TrainerConfig.summary_interval=1",
       "--conf_param", "load.num_envs=4",
       "--conf_param", "TrainerConfig.initial_collect_steps=200",
       "--conf_param", "TrainerConfig.mini_batch_size=64"]
# TD3: the same, with its target-policy noise (a batch draw of the whole mini-batch).
TD3 = [a.replace("sac_pendulum", "td3_pendulum") for a in SAC]
# A2C on the rollout's own graph, drawing its actions and a loss term's noise ([T, B]).
A2C = ["--conf", "tests/trainers/noisy_a2c_cartpole.gin"] + IMPALA[2:]
RUNS = {"impala": (IMPALA, 4), "sac": (SAC, 60), "td3": (TD3, 60), "a2c": (A2C, 4)}


def _train(root: Path, args, iterations: int, learners: int = 1, *extra):
    result = run_cli("train", *args, "--root_dir", str(root),
                     "--conf_param", f"TrainerConfig.num_iterations={iterations}",
                     "--conf_param", f"TrainerConfig.num_learners={learners}", *extra)
    assert result.returncode == 0, result.stderr[-3000:]
    return result


def _state(root: Path, iteration: int, learner: int = 0) -> dict:
    path = root / "ckpt" / (f"learner-{learner}/" if learner else "") / f"ckpt-{iteration}.pt"
    state = torch.load(path, weights_only=False)["algorithm"]
    return {k: v for k, v in state.items() if isinstance(v, torch.Tensor)
            and v.is_floating_point() and not k.startswith("_metrics")}


def _relative_difference(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = a.double(), b.double()
    return float((a - b).norm() / a.norm().clamp_min(1e-12))


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Each conf trained by one learner and by two."""
    out = {}
    for name, (args, iterations) in RUNS.items():
        root = tmp_path_factory.mktemp(name)
        _train(root / "one", args, iterations)
        two = _train(root / "two", args, iterations, 2)
        (root / "two.stderr").write_text(two.stderr)
        out[name] = root
    return out


@pytest.mark.parametrize("name", sorted(RUNS))
def test_two_learners_with_half_the_environments_each_train_as_one_with_all(runs, name):
    root, iterations = runs[name], RUNS[name][1]
    one, two = _state(root / "one", iterations), _state(root / "two", iterations)
    assert one.keys() == two.keys()
    worst = max((_relative_difference(one[k], two[k]), k) for k in one)
    assert worst[0] < 1e-5, worst
    # the second learner holds the same parameters, bit for bit
    second = _state(root / "two", iterations, learner=1)
    assert all(torch.equal(two[k], second[k]) for k in two)
    # the losses rank 0 wrote (averaged over the two) are the one learner's
    tags = [t for t in read_scalar_tags(root / "one" / "train") if t.startswith("loss/")]
    assert tags
    single = read_scalar_tags(root / "one" / "train", tags)
    double = read_scalar_tags(root / "two" / "train", tags)
    for tag in tags:
        assert single[tag][0] == double[tag][0], tag
        assert torch.allclose(torch.tensor(double[tag][1]), torch.tensor(single[tag][1]),
                              rtol=1e-5, atol=1e-7), tag
    # no step of theirs drew from a learner's own generator (distributed.own_draws_check)
    assert "drew from torch's own generator" not in (root / "two.stderr").read_text()
    # and every episode of both learners counts
    episodes = "Metrics/NumberOfEpisodes"
    assert (read_scalar_tags(root / "one" / "train", [episodes])[episodes][1]
            == read_scalar_tags(root / "two" / "train", [episodes])[episodes][1])


def test_without_averaging_the_gradients_the_learners_part(runs, tmp_path):
    """The equivalence above is no accident of the setup: the same two learners, each
    stepping on its own gradient, end apart from each other and from the one learner."""
    conf = tmp_path / "no_averaging.gin"
    conf.write_text(f'import tests.trainers._no_averaging\n'
                    f'include "{REPO}/confs/impala_cartpole.gin"\n')
    args = ["--conf", str(conf)] + IMPALA[2:]
    _train(tmp_path / "two", args, 4, 2)
    one, two = _state(runs["impala"] / "one", 4), _state(tmp_path / "two", 4)
    assert max(_relative_difference(one[k], two[k]) for k in one) > 1e-3
    second = _state(tmp_path / "two", 4, learner=1)
    assert not all(torch.equal(two[k], second[k]) for k in two)


def test_a_resumed_two_learner_run_is_the_run_without_the_stop(runs, tmp_path):
    root = tmp_path / "resumed"
    # (the conf's replay ring of one unroll is part of the state: it is saved)
    keep = ("--conf_param", "TrainerConfig.save_replay_buffer=True")
    _train(root, IMPALA, 2, 2, *keep)
    result = _train(root, IMPALA, 4, 2, *keep)
    assert "Resuming from iteration 2" in result.stdout
    straight, resumed = _state(runs["impala"] / "two", 4), _state(root, 4)
    assert all(torch.equal(straight[k], resumed[k]) for k in straight)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


def _torchrun(*args, root: Path, iterations: int = 4, learners: int = 2) -> subprocess.Popen:
    environ = {k: v for k, v in os.environ.items() if k != "RLF_DEBUG"}
    return subprocess.Popen(
        [sys.executable, "-m", "torch.distributed.run", *args, "-m", "rlf.bin.train", *IMPALA,
         "--root_dir", str(root), "--conf_param", f"TrainerConfig.num_iterations={iterations}",
         "--conf_param", f"TrainerConfig.num_learners={learners}"],
        cwd=REPO, env=environ, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_torchrun_starts_the_same_run(runs, tmp_path):
    proc = _torchrun("--standalone", "--nproc_per_node", "2", root=tmp_path / "run")
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err[-3000:]
    straight, launched = _state(runs["impala"] / "two", 4), _state(tmp_path / "run", 4)
    assert all(torch.equal(straight[k], launched[k]) for k in straight)


def test_torchrun_with_another_number_of_processes_is_refused(tmp_path):
    proc = _torchrun("--standalone", "--nproc_per_node", "2", root=tmp_path / "run",
                     learners=3)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode != 0
    assert ("error: the launcher started 2 learner processes (WORLD_SIZE), but "
            "TrainerConfig.num_learners = 3; make them equal") in err
    assert not (tmp_path / "run").exists()


def test_two_nodes_meet_through_a_c10d_rendezvous(runs, tmp_path):
    """Two torchrun agents of one learner each, as on two machines, meeting at
    ``localhost:<port>``: the run of rlf's own launcher."""
    port = _free_port()
    common = ["--nnodes", "2", "--nproc_per_node", "1", "--rdzv_backend", "c10d",
              "--rdzv_endpoint", f"localhost:{port}", "--rdzv_id", "two-nodes"]
    nodes = [_torchrun(*common, root=tmp_path / "run") for _ in range(2)]
    for node in nodes:
        out, err = node.communicate(timeout=300)
        assert node.returncode == 0, err[-3000:]
    straight, launched = _state(runs["impala"] / "two", 4), _state(tmp_path / "run", 4)
    assert all(torch.equal(straight[k], launched[k]) for k in straight)


def test_a_learner_that_dies_stops_the_run_with_one_line(tmp_path):
    conf = tmp_path / "dying.gin"
    conf.write_text(f'import tests.faults._dying_env\n'
                    f'include "{REPO}/confs/impala_cartpole.gin"\n'
                    f'load.env_name = "DyingCartPole-v0"\n')
    start = time.monotonic()
    result = run_cli("train", "--conf", str(conf), *IMPALA[2:], "--root_dir",
                     str(tmp_path / "run"), "--conf_param", "TrainerConfig.num_iterations=50",
                     "--conf_param", "TrainerConfig.num_learners=2", timeout=120)
    assert result.returncode == 1, result.stderr[-3000:]
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("error: learner 1 was killed by SIGKILL"), last
    log = last.split("its log: ")[1].split(")")[0]
    assert Path(log).is_file() and Path(log).parent.name == "1"
    assert time.monotonic() - start < 60


def test_sigterm_stops_every_learner_after_one_checkpoint(tmp_path):
    root = tmp_path / "run"
    environ = {k: v for k, v in os.environ.items() if k != "RLF_DEBUG"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "rlf.bin.train", *IMPALA, "--root_dir", str(root),
         "--conf_param", "TrainerConfig.num_iterations=100000",
         "--conf_param", "TrainerConfig.num_learners=2"],
        cwd=REPO, env=environ, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not (root / "train").is_dir() and time.monotonic() < deadline:
        time.sleep(0.2)
    time.sleep(3)  # a few iterations
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err[-3000:]
    assert "stopped by signal; checkpoint written" in out
    steps = [int(p.stem.split("-")[1]) for p in (root / "ckpt").glob("ckpt-*.pt")]
    assert len(steps) == 1 and steps[0] > 0
    assert (root / "ckpt" / "learner-1" / f"ckpt-{steps[0]}.pt").is_file()


@pytest.mark.parametrize("bindings,message", [
    (["load.num_envs=15"], "load.num_envs = 15 cannot be split evenly among"),
    (["TrainerConfig.async_unroll=True", "TrainerConfig.num_actors=3"],
     "num_actors = 3 cannot be split evenly among"),
    (["TrainerConfig.offline_buffer_dir='x'"], "offline_buffer_dir is not supported with"),
])
def test_a_setting_two_learners_cannot_split_is_refused_in_one_line(tmp_path, bindings,
                                                                    message):
    root = tmp_path / "run"
    extra = [a for b in bindings for a in ("--conf_param", b)]
    result = run_cli("train", *IMPALA, "--root_dir", str(root),
                     "--conf_param", "TrainerConfig.num_iterations=2",
                     "--conf_param", "TrainerConfig.num_learners=2", *extra)
    assert result.returncode == 2, result.stderr[-3000:]
    lines = result.stderr.strip().splitlines()
    assert message in lines[-1], lines[-1]
    assert not root.exists()


def test_a_trainer_outside_a_group_of_learners_refuses_num_learners(tmp_path):
    """A Trainer built in a process that joined no group (a script, a Tune trial) would train
    as one learner: refused in one line."""
    import gin
    from rlf.algorithms import TrainerConfig
    from rlf.trainers.gin_config import parse_config
    from rlf.trainers import Trainer
    from rlf.utils.errors import UserError
    parse_config(str(REPO / "confs/impala_cartpole.gin"), ["TrainerConfig.num_learners=2"])
    try:
        with pytest.raises(UserError, match="num_learners = 2, but this process is one"):
            Trainer(TrainerConfig(), root_dir=str(tmp_path / "run")).build()
    finally:
        gin.clear_config()
    assert not (tmp_path / "run").exists()


def test_a_checkpoint_of_two_learners_loads_into_one_and_back(tmp_path):
    root = tmp_path / "run"
    _train(root, IMPALA, 2, 2)
    one = _train(root, IMPALA, 4, 1)
    assert "Resuming from iteration 2" in one.stdout
    assert "was written by 2 learner(s) and this run has 1" in one.stderr
    two = _train(root, IMPALA, 6, 2)
    assert "Resuming from iteration 4" in two.stdout
    assert "finished: 6 iterations" in two.stdout
    # each run went on from the other's updates, environment steps and summary step
    previous = (0, 0)
    for iteration in (2, 4, 6):
        state = torch.load(root / "ckpt" / f"ckpt-{iteration}.pt", weights_only=False)
        assert state["trainer"]["global_counter"] == iteration
        counts = (state["algorithm"]["_extra_state"]["num_updates"],
                  state["trainer"]["env_steps"])
        assert counts[0] > previous[0] and counts[1] > previous[1], (iteration, counts)
        previous = counts


def test_trainers_of_different_worlds_train_in_one_process(runs, tmp_path):
    """Each of two learner processes trains the two-learner run through the ``World`` handed
    to its ``Trainer`` (the process's own world left as it is), then a one-learner run of its
    own through another ``Trainer``: the first is the two-learner run, each second the one
    learner's, bit for bit."""
    environ = {k: v for k, v in os.environ.items() if k != "RLF_DEBUG"}
    roots = [tmp_path / name for name in ("two", "alone-0", "alone-1")]
    result = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node",
         "2", "-m", "tests.trainers._two_worlds", *map(str, roots)],
        cwd=REPO, env=environ, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    for root, straight in zip(roots, ("two", "one", "one")):
        expected, trained = _state(runs["impala"] / straight, 4), _state(root, 4)
        assert all(torch.equal(expected[k], trained[k]) for k in expected), root.name
