"""The support matrix: every built-in algorithm, the two examples and a user's subclass, each
trained by its shipped conf (with a tiny budget) on every path: the sync unroller, the same
through the Python API (``rlf.train``, then the policy's ``predict``), actor processes, Ray
actors, two learners, offline data, hybrid (online and offline data) and a run stopped and
resumed, which must end exactly as the run without the stop.

A cell's outcome is ``"trains"`` (the run finished and updated its parameters) or
``"refused: <the one line>"`` (a ``UserError`` before training). Anything else is a crash and
fails the test. ``python -m tests.matrix.generate`` writes the outcomes as the table of
``docs/support-matrix.md``; ``tests/matrix/test_matrix.py`` checks every cell against it.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import socket
import sys
import traceback
from tests.algorithms._learners import learner_of
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

REPO = Path(__file__).resolve().parents[2]
ALF_FILE = REPO / "tests" / "data" / "alf_pendulum_sac_replay_buffer.pt"

#: Every cell: no evaluation, no step budget, checkpoints only where a cell makes them.
COMMON = ("TrainerConfig.num_env_steps=0", "TrainerConfig.evaluate=False",
          "TrainerConfig.summary_interval=1", "TrainerConfig.checkpoint_interval=1000",
          "TrainerConfig.random_seed=0")
#: Replay settings of the tiny off-policy runs.
REPLAY = ("TrainerConfig.initial_collect_steps=8", "TrainerConfig.mini_batch_size=8",
          "TrainerConfig.replay_buffer_length=64", "TrainerConfig.num_updates_per_train_iter=1")
#: ALF's Pendulum file (SAC's replay): actions recorded normalised to [-1, 1].
ALF = (f"TrainerConfig.offline_buffer_dir='{ALF_FILE}'",
       "TrainerConfig.offline_normalized_actions=True")


@dataclasses.dataclass(frozen=True)
class Row:
    """One algorithm: its conf and the bindings that make it tiny.

    Attributes:
        conf: the shipped conf, relative to the repository.
        bindings: the tiny run's bindings.
        off_policy: whether it has a replay buffer (saved for the exact resume, and read by
            the offline cells of rows whose ``offline`` is ``"own"``).
        offline: the offline data it reads: ``"own"`` (its own replay, saved by its resume
            cell), ``"alf"`` (ALF's Pendulum file) or ``"dqn"`` (the DQN row's replay).
        offline_only: it trains from offline data alone (behaviour cloning): every column
            but ``hybrid`` reads its data with ``unroll_length = 0``.
    """

    conf: str
    bindings: Tuple[str, ...] = ()
    off_policy: bool = True
    offline: str = "own"
    offline_only: bool = False


CARTPOLE = ("load.num_envs=2",)
ROWS: Dict[str, Row] = {
    "IMPALA": Row("confs/impala_cartpole.gin", CARTPOLE + (
        "TrainerConfig.unroll_length=8", "MLPEncoder.hidden=(16,)")),
    "IMPALA + replay": Row("confs/impala_cartpole.gin", CARTPOLE + (
        "TrainerConfig.unroll_length=8", "MLPEncoder.hidden=(16,)",
        "ImpalaAlgorithm.experience_replay_fraction=0.5",
        "ImpalaAlgorithm.experience_replay_length=32")),
    "PPO": Row("confs/ppo_cartpole.gin", CARTPOLE + (
        "TrainerConfig.unroll_length=8", "TrainerConfig.num_updates_per_train_iter=2",
        "TrainerConfig.mini_batch_size=8", "MLPEncoder.hidden=(16,)"), off_policy=False),
    "recurrent PPO": Row("confs/ppo_cartpole_novel.gin", CARTPOLE + (
        "TrainerConfig.unroll_length=8", "TrainerConfig.num_updates_per_train_iter=2",
        "TrainerConfig.mini_batch_size=2", "TrainerConfig.mini_batch_length=4",
        "ActorCriticNetwork.lstm_size=8", "MLPEncoder.hidden=(16,)"), off_policy=False),
    "SAC": Row("confs/sac_pendulum.gin", ("load.num_envs=2", "TrainerConfig.unroll_length=4")
               + REPLAY, offline="alf"),
    "TD3": Row("confs/td3_pendulum.gin", ("load.num_envs=2", "TrainerConfig.unroll_length=4")
               + REPLAY, offline="alf"),
    "DQN": Row("confs/dqn_cartpole.gin", CARTPOLE + (
        "TrainerConfig.unroll_length=4", "MLPEncoder.hidden=(16,)") + REPLAY),
    "DQN + HER": Row("confs/dqn_her_bit_flipping.gin", (
        "load.num_envs=2", "load.num_bits=4", "TrainerConfig.unroll_length=4",
        "MLPEncoder.hidden=(16,)", "HindsightSampler.achieved_goal=(0, 4)",
        "HindsightSampler.desired_goal=(4, 8)", "TrainerConfig.num_eval_episodes=10")
        + REPLAY),
    "R2D2": Row("confs/r2d2_cartpole_novel.gin", CARTPOLE + (
        "TrainerConfig.unroll_length=8", "TrainerConfig.num_updates_per_train_iter=1",
        "TrainerConfig.mini_batch_size=4", "TrainerConfig.mini_batch_length=8",
        "TrainerConfig.burn_in_steps=2", "R2D2Algorithm.n_step=2",
        "TrainerConfig.initial_collect_steps=16", "TrainerConfig.replay_buffer_length=64",
        "RecurrentQNetwork.lstm_size=8", "MLPEncoder.hidden=(16,)")),
    "IQL": Row("confs/iql_mujoco.gin", (
        "load.env_name='Pendulum-v1'", "load.num_envs=2", "TrainerConfig.unroll_length=4",
        "CriticNetwork.hidden=(16,)", "ValueNetwork.hidden=(16,)",
        "TrainerConfig.mini_batch_size=8", "TrainerConfig.initial_collect_steps=8",
        "TrainerConfig.replay_buffer_length=64"), offline="alf"),
    "A2C (example)": Row("examples/a2c_cartpole.gin", CARTPOLE + (
        "TrainerConfig.unroll_length=8", "A2C.hidden=(16,)"), off_policy=False),
    "BC (example)": Row("examples/bc_cartpole.gin", CARTPOLE + (
        "TrainerConfig.mini_batch_size=8", "BehaviourCloning.hidden=(16,)"),
        offline="dqn", offline_only=True),
    "user subclass": Row("tests/matrix/user_cartpole.gin", CARTPOLE + (
        "TrainerConfig.unroll_length=4",) + REPLAY),
}

#: Column -> the bindings it adds.
COLUMNS: Dict[str, Tuple[str, ...]] = {
    "sync": (),
    "Python API": (),
    "actor processes": ("TrainerConfig.async_unroll=True", "TrainerConfig.num_actors=1"),
    "Ray actors": ("TrainerConfig.async_unroll=True", "TrainerConfig.use_ray=True",
                   "TrainerConfig.num_actors=1"),
    "2 learners": ("TrainerConfig.num_learners=2",),
    "offline": ("TrainerConfig.unroll_length=0",),
    "hybrid": (),
    "stop, resume": (),
}
ITERATIONS = 4


def offline_bindings(name: str, files: Dict[str, Path]) -> Tuple[str, ...]:
    """The bindings naming row ``name``'s offline data (``files``: the replay files the resume
    cells saved, by row name)."""
    row = ROWS[name]
    if row.offline == "alf":
        return ALF
    source = files.get("DQN" if row.offline == "dqn" else name)
    if source is None:  # on-policy rows: refused before any file is read
        source = ALF_FILE
    return (f"TrainerConfig.offline_buffer_dir='{source}'",)


def bindings(name: str, column: str, files: Dict[str, Path],
             iterations: int = ITERATIONS) -> List[str]:
    """Every binding of cell (``name``, ``column``)."""
    row = ROWS[name]
    out = list(COMMON) + list(row.bindings) + list(COLUMNS[column])
    out.append(f"TrainerConfig.num_iterations={iterations}")
    if column in ("offline", "hybrid") or row.offline_only:
        out += offline_bindings(name, files)
    if row.offline_only and column not in ("hybrid", "offline"):
        out.append("TrainerConfig.unroll_length=0")
    if row.offline_only and column == "hybrid":
        out.append("TrainerConfig.unroll_length=4")
    return out


# ---------------------------------------------------------------------- running a cell
def _parse(conf: str, binds: Sequence[str]):
    import gin

    from rlf.algorithms import TrainerConfig
    from rlf.trainers.gin_config import ConfigError, parse_config
    from rlf.utils.errors import one_line
    gin.clear_config()
    parse_config(str(REPO / conf), list(binds))
    try:  # as rlf.bin.train: the config's own checks are mistakes in the input
        return TrainerConfig()
    except (ValueError, TypeError) as e:
        raise ConfigError(one_line(e)) from e


def train(conf: str, binds: Sequence[str], root: Path, world=None) -> Dict[str, object]:
    """Trains ``conf`` with ``binds`` in ``root`` in this process (as ``rlf.bin.train`` does:
    a ``UserError`` anywhere before or during training is a refusal), as one of ``world``'s
    learners (one learner if None).

    Returns:
        ``{"outcome": "trains" | "refused: <line>", "updates": int, "state": path}``: the
        number of updates and the newest checkpoint.
    """
    from rlf.trainers.gin_config import configured_values_refused_as_config_errors
    from rlf.trainers import ActorFailure, Trainer
    from rlf.utils.errors import UserError, one_line
    try:
        config = _parse(conf, binds)
        trainer = Trainer(config, root_dir=str(root), progress=False, world=world)
        with configured_values_refused_as_config_errors():
            trainer.build()
        trainer.train()
    except ActorFailure as e:
        if not getattr(e, "caused_by_input", False):
            raise
        return {"outcome": f"refused: {one_line(e)}", "updates": 0}
    except UserError as e:
        return {"outcome": f"refused: {one_line(e)}", "updates": 0}
    updates = int(learner_of(trainer.algorithm).counters.num_updates)
    if updates == 0:
        raise AssertionError(f"{conf}: the run finished without an update ({list(binds)})")
    return {"outcome": "trains", "updates": updates}


def _tensors(root: Path, iteration: int) -> Dict[str, object]:
    import torch
    state = torch.load(root / "ckpt" / f"ckpt-{iteration}.pt", weights_only=False)
    return {k: v for k, v in state["algorithm"].items() if isinstance(v, torch.Tensor)}


def run_resume(name: str, root: Path, files: Dict[str, Path]) -> Dict[str, object]:
    """The stop-then-resume cell: ``ITERATIONS`` iterations straight, and half of them, then
    the rest in a new ``Trainer`` resuming the first half's directory; "trains" when the two
    end with the same tensors, bit for bit. An off-policy row saves its replay buffer (and
    leaves it in ``files`` for the offline cells)."""
    import torch
    row = ROWS[name]
    extra = ["TrainerConfig.save_replay_buffer=True"] if row.off_policy else []
    if row.offline_only:
        extra = []
    straight = train(row.conf, bindings(name, "stop, resume", files) + extra, root / "straight")
    if straight["outcome"] != "trains":
        return straight
    half = ITERATIONS // 2
    first = train(row.conf, bindings(name, "stop, resume", files, half) + extra,
                  root / "resumed")
    if first["outcome"] != "trains":
        return first
    second = train(row.conf, bindings(name, "stop, resume", files) + extra, root / "resumed")
    if second["outcome"] != "trains":
        return second
    a, b = _tensors(root / "straight", ITERATIONS), _tensors(root / "resumed", ITERATIONS)
    differ = sorted(k for k in a if k not in b or not torch.equal(a[k], b[k]))
    if differ:
        raise AssertionError(f"{name}: the resumed run differs from the straight one in "
                             f"{differ[:5]}")
    replay = root / "straight" / "ckpt" / f"replay_buffer-{ITERATIONS}.pt"
    if replay.exists():
        files[name] = replay
    return {"outcome": "trains", "updates": straight["updates"]}


def train_from_python(conf: str, binds: Sequence[str], root: Path) -> Dict[str, object]:
    """The sync cell through ``rlf.train`` (its ``UserError`` is a refusal), then one
    ``predict`` of ``rlf.load_policy``'s policy: "trains" when the run did its iterations and
    its policy acts."""
    import numpy as np

    import rlf
    from rlf.utils.errors import UserError, one_line
    try:
        run = rlf.train(str(REPO / conf), root_dir=root, bindings=list(binds), progress=False)
    except UserError as e:
        return {"outcome": f"refused: {one_line(e)}", "updates": 0}
    if run.iterations != ITERATIONS:
        raise AssertionError(f"{conf}: rlf.train ran {run.iterations} iterations, not "
                             f"{ITERATIONS} ({list(binds)})")
    policy = run.policy()
    action, _ = policy.predict(policy.observation_spec.zeros().numpy())
    if np.shape(action) != tuple(policy.action_spec.shape):
        raise AssertionError(f"{conf}: predict gave an action of shape {np.shape(action)}")
    return {"outcome": "trains", "updates": run.iterations}


def run_cell(name: str, column: str, root: Path, files: Dict[str, Path]) -> Dict[str, object]:
    """One cell of a column that runs in this process (every column but ``"2 learners"``)."""
    if column == "stop, resume":
        return run_resume(name, root, files)
    if column == "Python API":
        return train_from_python(ROWS[name].conf, bindings(name, column, files), root)
    row = ROWS[name]
    return train(row.conf, bindings(name, column, files), root)


# ---------------------------------------------------------------------- two learners
def _learner(rank: int, port: int, names: List[str], root: str, files: Dict[str, str],
             out: str) -> None:
    """One of two learner processes: joins the group once, then trains every row's cell."""
    os.environ.update(RANK=str(rank), WORLD_SIZE="2", LOCAL_RANK=str(rank),
                      MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    sys.path.insert(0, str(REPO))
    from rlf.runtime import configure_process
    from rlf.trainers import learners
    configure_process(num_threads=1)
    world = learners.join_learners(2, "cpu")
    results = {}
    try:
        for name in names:
            row = ROWS[name]
            try:
                results[name] = train(row.conf, bindings(name, "2 learners",
                                                         {k: Path(v) for k, v in files.items()}),
                                      Path(root) / name.replace(" ", "_"), world)
            except Exception:  # a crash: recorded, the test fails on it
                results[name] = {"outcome": "crash: " + traceback.format_exc(limit=-3)}
    finally:
        learners.leave_learners()
    Path(out).write_text(json.dumps(results))
    # As rlf.bin.train's learners end: Python's finalization can meet gloo's threads in an
    # order that aborts the process (SIGABRT) after its work is done.
    learners.end_learner(0)


def run_two_learners(names: List[str], root: Path, files: Dict[str, Path],
                     timeout: float = 300.0) -> Dict[str, Dict[str, object]]:
    """The ``"2 learners"`` column: two spawned processes that join one gloo group and train
    every row in turn (the cheapest launcher: one group for all rows). Returns rank 0's
    outcomes, after checking that rank 1 saw the same."""
    import torch.multiprocessing as mp
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.get_context("spawn")
    outs = [root / f"rank-{r}.json" for r in range(2)]
    procs = [ctx.Process(target=_learner, args=(r, port, names, str(root / f"rank-{r}"),
                                                {k: str(v) for k, v in files.items()},
                                                str(outs[r])))
             for r in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout)
    for p in procs:
        if p.is_alive():
            p.kill()
            raise AssertionError(f"the two learners did not finish in {timeout} s")
    if any(p.exitcode for p in procs) or not all(o.exists() for o in outs):
        raise AssertionError(f"a learner process failed: exit codes "
                             f"{[p.exitcode for p in procs]}")
    zero, one = (json.loads(o.read_text()) for o in outs)
    for name in names:
        if zero[name]["outcome"] != one[name]["outcome"]:
            raise AssertionError(f"{name}: the learners disagree: {zero[name]} vs {one[name]}")
    shutil.rmtree(root / "rank-1", ignore_errors=True)
    return zero


# ---------------------------------------------------------------------- the whole matrix
def run_all(root: Path, names: Optional[List[str]] = None,
            columns: Optional[List[str]] = None) -> Dict[str, Dict[str, str]]:
    """Every cell (or those of ``names`` x ``columns``), in an order that gives the offline
    cells their files. Returns ``{row: {column: outcome}}``."""
    import ray
    names = names or list(ROWS)
    columns = columns or list(COLUMNS)
    files: Dict[str, Path] = {}
    # The resume cells first: they save the replay files the offline cells read (the DQN
    # row's, read by BC, comes before BC's).
    order = ["stop, resume", "sync", "Python API", "offline", "hybrid", "actor processes",
             "Ray actors", "2 learners"]
    needs_dqn = any(ROWS[n].offline == "dqn" for n in names)
    table: Dict[str, Dict[str, str]] = {n: {} for n in names}
    for column in [c for c in order if c in columns]:
        if column == "2 learners":
            results = run_two_learners(names, root / "learners", files)
            for name in names:
                table[name][column] = str(results[name]["outcome"])
            continue
        if column == "Ray actors" and not ray.is_initialized():
            ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
        run_names = names
        if column == "stop, resume" and needs_dqn and "DQN" not in names:
            run_names = ["DQN"] + names
        for name in run_names:
            cell = root / column.replace(" ", "_").replace(",", "") / name.replace(" ", "_")
            outcome = run_cell(name, column, cell, files)["outcome"]
            if name in table:
                table[name][column] = str(outcome)
    return table


# ---------------------------------------------------------------------- the docs page
PAGE = REPO / "docs" / "support-matrix.md"
_BEGIN, _END = "<!-- matrix: begin -->", "<!-- matrix: end -->"


def normalized(outcome: str, root: Path) -> str:
    """``outcome`` with this machine's paths replaced (``<repo>``, ``<run>``)."""
    return outcome.replace(str(root), "<run>").replace(str(REPO), "<repo>")


def render(table: Dict[str, Dict[str, str]]) -> str:
    """The generated part of the page: the table, then each refusal's line by number."""
    columns = list(COLUMNS)
    lines: List[str] = []
    refusals: List[str] = []
    head = "| algorithm | " + " | ".join(columns) + " |"
    lines += [head, "|" + "---|" * (len(columns) + 1)]
    for name in ROWS:
        cells = []
        for column in columns:
            outcome = table[name][column]
            if outcome == "trains":
                cells.append("trains")
                continue
            line = outcome[len("refused: "):]
            if line not in refusals:
                refusals.append(line)
            cells.append(f"refused ({refusals.index(line) + 1})")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    lines.append("")
    lines += [f"{i}. `{line}`" for i, line in enumerate(refusals, 1)]
    return "\n".join([_BEGIN, *lines, _END])


def documented(text: Optional[str] = None) -> Dict[str, Dict[str, str]]:
    """The outcomes the page states: ``{row: {column: "trains" | "refused: <line>"}}``."""
    text = PAGE.read_text() if text is None else text
    body = text[text.index(_BEGIN) + len(_BEGIN):text.index(_END)].strip().splitlines()
    refusals = {}
    for line in body:
        number, _, rest = line.partition(". `")
        if number.isdigit():
            refusals[number] = rest[:-1]
    header = [c.strip() for c in body[0].strip("|").split("|")][1:]
    table: Dict[str, Dict[str, str]] = {}
    for line in body[2:]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip("|").split("|")]
        row = table[cells[0]] = {}
        for column, cell in zip(header, cells[1:]):
            row[column] = ("trains" if cell == "trains"
                           else "refused: " + refusals[cell[len("refused ("):-1]])
    return table
