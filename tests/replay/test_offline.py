"""Offline replay: ALF's real checkpoint, rlf's own saved buffers, bad files, offline-only and
hybrid training."""

import functools
import hashlib
import re
import shutil
from pathlib import Path

import gin
import pytest
import torch

from examples.bc import BehaviourCloning
from rlf.algorithms import DQNAlgorithm, ImpalaAlgorithm, SACAlgorithm, TrainerConfig, loop_of
from rlf.data_structures import Experience, RowSource, StepType
from rlf.environments import load
from rlf.environments.vector_environment import VectorEnvironment
from rlf.replay import ReplayBuffer
from rlf.replay.offline import (OfflineDataError, export_replay_buffer as export,
                                load_replay_checkpoint, make_offline_replay_buffer,
                                replay_buffer_steps)
from rlf.trainers import Trainer

ALF_FILE = Path(__file__).resolve().parents[1] / "data" / "alf_pendulum_sac_replay_buffer.pt"
ALF_SHA256 = "07e244c89795eddc623f57295944de9b89758f7ea4dd16f13593d20279da38c7"


def _sha(path):
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


@pytest.fixture
def pendulum():
    env = load("Pendulum-v1", 1)
    yield env
    env.close()


def test_alf_pendulum_file_loads_by_key_in_time_order(pendulum):
    assert _sha(ALF_FILE) == ALF_SHA256  # the copy described in tests/data/README.md
    alg = BehaviourCloning(pendulum.observation_spec(), pendulum.action_spec())
    buf = make_offline_replay_buffer(ALF_FILE, alg.offline_layout().spec,
                                     aliases=alg.offline_layout().aliases)
    assert buf.num_environments == 1 and buf.total_size == 600
    data = buf.gather_all()
    ts = data.time_step
    assert ts.step_type.dtype == torch.int32 and ts.observation.shape == (1, 600, 3)
    assert data.action.shape == (1, 600, 1) and data.action.dtype == torch.float32
    assert torch.equal(data.rollout_info["action"], data.action)  # the alias
    assert set(ts.step_type.unique().tolist()) <= {StepType.FIRST, StepType.MID, StepType.LAST}
    # the ring's oldest step (position 9400) sits in slot 9400 % 600 = 400
    raw = torch.load(ALF_FILE, weights_only=True)["algorithm"]
    ring = raw["_replay_buffer.time_step|observation"][0]
    assert torch.equal(ts.observation[0], torch.cat([ring[400:], ring[:400]]))
    # every LAST is followed by a FIRST in time order
    st = ts.step_type[0]
    assert (st[1:][st[:-1] == StepType.LAST] == StepType.FIRST).all()


def test_bad_files_raise_naming_key_and_shapes_and_touch_nothing(tmp_path, pendulum):
    alg = BehaviourCloning(pendulum.observation_spec(), pendulum.action_spec())
    spec = alg.offline_layout().spec
    copy = tmp_path / "alf.pt"
    shutil.copy(ALF_FILE, copy)
    digest = _sha(copy)
    with pytest.raises(ValueError, match=r"has no 'rollout_info\|action'"):
        make_offline_replay_buffer(copy, spec)  # without the alias the field is missing
    cartpole = load("CartPole-v1", 1)
    wrong = BehaviourCloning(cartpole.observation_spec(), cartpole.action_spec())
    with pytest.raises(ValueError, match=r"'time_step\|observation' has shape \(1, 600, 3\), "
                                         r"expected \[num_envs, max_length, 4\]"):
        make_offline_replay_buffer(copy, wrong.offline_layout().spec,
                                   aliases=wrong.offline_layout().aliases)
    cartpole.close()
    assert _sha(copy) == digest
    truncated = tmp_path / "truncated.pt"
    truncated.write_bytes(copy.read_bytes()[:5000])
    with pytest.raises(ValueError, match=r"^replay checkpoint file .*truncated.pt is unreadable"):
        load_replay_checkpoint(truncated)


@pytest.fixture
def cartpole_gin():
    gin.parse_config("load.env_name = 'CartPole-v1'\nload.num_envs = 4")
    yield
    gin.clear_config()


def _impala(**kw):
    return functools.partial(ImpalaAlgorithm, td_lambda=0.95,
                             optimizer=functools.partial(torch.optim.Adam, lr=1e-3), **kw)


def _replay_config(**kw):
    args = dict(algorithm_ctor=_impala(), random_seed=1, unroll_length=8,
                replay_buffer_length=64, mini_batch_size=8, mini_batch_length=9,
                initial_collect_steps=64, num_iterations=12, checkpoint_interval=100,
                save_replay_buffer=True)
    args.update(kw)
    return TrainerConfig(**args)


def test_save_export_load_round_trip_and_offline_impala(tmp_path, cartpole_gin):
    trainer = Trainer(_replay_config(), tmp_path / "run", progress=False)
    trainer.train()
    online = trainer.loop.replay_buffer.gather_all(ignore_earliest_frames=False)
    out = export(str(tmp_path / "run"), str(tmp_path / "cartpole.pt"))
    alg = trainer.algorithm
    buf = make_offline_replay_buffer(out, alg.offline_layout().spec)
    offline = buf.gather_all()
    assert buf.total_size == 4 * 64
    for name in ("step_type", "reward", "discount", "observation", "prev_action", "env_id"):
        assert torch.equal(getattr(offline.time_step, name), getattr(online.time_step, name))
    assert torch.equal(offline.action, online.action)
    assert torch.equal(offline.rollout_info.behaviour_params,
                       online.rollout_info.behaviour_params)

    # IMPALA trained purely on the recorded data, with the recorded behaviour policy
    seen = []

    class Probe(ImpalaAlgorithm):
        def calc_loss(self, info):
            _, log_rhos, valid, _ = self.vtrace_returns(info)
            seen.append(log_rhos[valid])
            return super().calc_loss(info)

    steps = {"n": 0}
    original = VectorEnvironment.step

    def counting_step(self, action):
        steps["n"] += 1
        return original(self, action)

    VectorEnvironment.step = counting_step
    try:
        result = Trainer(_replay_config(
            algorithm_ctor=functools.partial(Probe, td_lambda=0.95, optimizer=functools.partial(
                torch.optim.Adam, lr=1e-3)),
            unroll_length=0, offline_buffer_dir=str(out), num_iterations=5,
            save_replay_buffer=False), tmp_path / "offline", progress=False).train()
    finally:
        VectorEnvironment.step = original
    assert steps["n"] == 0 and result["env_steps"] == 0 and result["iterations"] == 5
    assert len(seen) == 5 and seen[-1].abs().max() > 0  # a fresh network is not mu: rho != 1


def test_hybrid_batches_have_the_configured_ratio(tmp_path, cartpole_gin):
    trainer = Trainer(_replay_config(), tmp_path / "run", progress=False)
    trainer.train()
    out = export(str(tmp_path / "run"), str(tmp_path / "cartpole.pt"))
    sizes, sources = [], []

    class Probe(ImpalaAlgorithm):
        def calc_loss(self, info):
            sizes.append(tuple(info.value.shape))
            sources.append(loop_of(self).learner.row_sources.tolist())
            return super().calc_loss(info)

    Trainer(_replay_config(
        algorithm_ctor=functools.partial(Probe, optimizer=functools.partial(
            torch.optim.Adam, lr=1e-3)), offline_buffer_dir=str(out), offline_fraction=0.75,
        num_iterations=12, save_replay_buffer=False), tmp_path / "hybrid",
        progress=False).train()
    # before online data exists: offline only (8 sequences); then 8 online + 24 offline
    assert sizes[0] == (9, 8)
    assert sizes[-1] == (9, 32)
    # each row's RowSource, in order: the sampled online rows, then the offline ones
    assert sources[0] == [RowSource.SAMPLED] * 8
    assert sources[-1] == [RowSource.SAMPLED] * 8 + [RowSource.OFFLINE] * 24
    # IMPALA's experience replay mixes in after the offline data, by the same mechanism: half
    # of the 32 rows so far; every part keeps the fields the offline files hold
    sources.clear()
    Trainer(_replay_config(
        algorithm_ctor=functools.partial(Probe, experience_replay_fraction=0.5,
                                         optimizer=functools.partial(torch.optim.Adam, lr=1e-3)),
        offline_buffer_dir=str(out), offline_fraction=0.75, num_iterations=12,
        save_replay_buffer=False), tmp_path / "hybrid_replay", progress=False).train()
    assert sources[-1] == ([RowSource.SAMPLED] * 8 + [RowSource.OFFLINE] * 24
                           + [RowSource.MIXED] * 32)


def test_bc_learns_from_alf_pendulum_in_sequences_of_one_step(tmp_path):
    gin.parse_config("load.env_name = 'Pendulum-v1'\nload.num_envs = 1")
    try:
        config = TrainerConfig(
            algorithm_ctor=functools.partial(BehaviourCloning, optimizer=functools.partial(
                torch.optim.Adam, lr=1e-3)),
            unroll_length=0, offline_buffer_dir=str(ALF_FILE), offline_normalized_actions=True,
            mini_batch_size=32,
            mini_batch_length=1, num_iterations=30, random_seed=0, summary_interval=1)
        result = Trainer(config, tmp_path, progress=False).train()
    finally:
        gin.clear_config()
    assert result["iterations"] == 30 and result["env_steps"] == 0
    # It learned: a gradient at every update and a falling negative log-likelihood (a
    # one-step sequence starts no transition inside it, so the loop's default mask, which
    # BC replaces by its own, would leave it no loss at all).
    from rlf.utils.tensorboard_reader import read_scalar_tags
    series = read_scalar_tags(tmp_path / "train", ["global_grad_norm/BC/0",
                                                   "loss/BC/neg_log_likelihood"])
    assert min(series["global_grad_norm/BC/0"][1]) > 0
    nll = series["loss/BC/neg_log_likelihood"][1]
    assert len(nll) == 30 and nll[-1] < nll[0]


def test_replay_buffer_steps_ignores_other_names(tmp_path):
    for name in ("replay_buffer-20.pt", "replay_buffer-3.pt", "replay_buffer-old.pt",
                 "replay_buffer-5.pt.tmp", "ckpt-7.pt"):
        (tmp_path / name).write_bytes(b"")
    assert replay_buffer_steps(tmp_path) == [3, 20]


def _atari_frames(tmp_path, stacked):
    """A real Pong replay buffer of 2 games x 40 steps (random actions), saved in ALF's
    layout; with ``stacked`` it stores single frames (``ReplayBuffer.stacked_frames``), as
    rlf's Atari confs do, else whole stacks (ALE's own). Returns ``(file, buffer, spec)``."""
    env = load("ALE/Pong-v5", 2, seed=0)
    ts = env.reset()
    spec = Experience(time_step=env.time_step_spec()._replace(env_info={}),
                      action=env.action_spec(), rollout_info=(), state=())
    frames = {"time_step.observation": 4} if stacked else None
    buffer = ReplayBuffer(spec, 2, 64, stacked_frames=frames)
    torch.manual_seed(0)
    for _ in range(40):
        action = torch.randint(0, 6, (2,))
        buffer.add_batch(Experience(time_step=ts._replace(env_info={}), action=action,
                                    rollout_info=(), state=()))
        ts = env.step(action)
    env.close()
    path = tmp_path / f"pong_{'single' if stacked else 'stacks'}.pt"
    torch.save({"algorithm": {f"_replay_buffer.{k}": v
                              for k, v in buffer.state_dict().items()}}, path)
    return path, buffer, spec


@pytest.mark.parametrize("stacked_file", [True, False])
def test_atari_files_of_single_frames_or_whole_stacks_load_into_a_frame_stacking_buffer(
        tmp_path, stacked_file):
    # Before, rlf's own Atari replay files (single frames) were refused by every Atari conf:
    # the offline buffer ignored ReplayBuffer.stacked_frames.
    path, source, spec = _atari_frames(tmp_path, stacked_file)
    ctor = functools.partial(ReplayBuffer, stacked_frames={"time_step.observation": 4})
    offline = make_offline_replay_buffer(path, spec, buffer_ctor=ctor)
    assert offline.state_dict()["time_step|observation"].shape == (2, 40, 84, 84)
    env_ids, positions = torch.tensor([0, 1, 0]), torch.tensor([3, 10, 36])
    got = offline.get_batch_by_indices(env_ids, positions, 4)
    want = source.get_batch_by_indices(env_ids, positions, 4)
    assert got.time_step.observation.shape == (3, 4, 4, 84, 84)
    assert torch.equal(got.time_step.observation, want.time_step.observation)
    assert torch.equal(got.action, want.action)
    if stacked_file:  # single frames into a buffer without the stacking: refused, with the fix
        with pytest.raises(OfflineDataError, match=re.escape(
                "a file of single frames needs the stacking configured, e.g. "
                "ReplayBuffer.stacked_frames = {'time_step.observation': 4}")):
            make_offline_replay_buffer(path, spec)


def _train_offline(tmp_path, bindings, network, **config):
    """Trains ``num_iterations`` purely offline; returns whether ``network``'s parameters
    changed and the trainer's result."""
    gin.parse_config(bindings)
    try:
        trainer = Trainer(TrainerConfig(unroll_length=0, random_seed=0, **config), tmp_path,
                          progress=False)
        params = list(network(trainer.build()).parameters())
        before = [p.detach().clone() for p in params]
        result = trainer.train()
    finally:
        gin.clear_config()
    return any(not torch.equal(p, b) for p, b in zip(params, before)), result


def test_dqn_and_sac_train_on_offline_files(tmp_path):
    # Before, both failed in their first train_step: the offline data had no
    # rollout_info.action to replay.
    path, _, _ = _atari_frames(tmp_path, stacked=True)
    changed, result = _train_offline(
        tmp_path / "dqn", "load.env_name = 'ALE/Pong-v5'\nload.num_envs = 2\n"
        "ReplayBuffer.stacked_frames = {'time_step.observation': 4}",
        lambda alg: alg.q_network,
        algorithm_ctor=functools.partial(DQNAlgorithm, n_step=3, optimizer=torch.optim.Adam),
        offline_buffer_dir=str(path), mini_batch_size=4, mini_batch_length=4, num_iterations=2)
    assert changed and result["env_steps"] == 0
    adam = functools.partial(torch.optim.Adam, lr=1e-3)
    changed, result = _train_offline(
        tmp_path / "sac", "load.env_name = 'Pendulum-v1'\nload.num_envs = 1",
        lambda alg: alg.actor,
        algorithm_ctor=functools.partial(SACAlgorithm, actor_optimizer=adam,
                                         critic_optimizer=adam, alpha_optimizer=adam),
        offline_buffer_dir=str(ALF_FILE), offline_normalized_actions=True,
        mini_batch_size=32, mini_batch_length=2, num_iterations=3)
    assert changed and result["env_steps"] == 0


def test_a_file_named_twice_is_refused(tmp_path):
    # Named twice (or as a file and through its directory), its steps were loaded twice and
    # sampled at double weight.
    from rlf.replay.offline import offline_files
    copy = tmp_path / "alf.pt"
    shutil.copy(ALF_FILE, copy)
    for files in ([copy, copy], [str(copy), tmp_path], [tmp_path, tmp_path / "." / "alf.pt"]):
        with pytest.raises(OfflineDataError, match=r"offline replay file .*alf\.pt is named "
                                                   r"twice \(also as .*alf\.pt\)"):
            offline_files(files)
    assert offline_files([tmp_path]) == [copy]
