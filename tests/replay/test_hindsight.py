"""Hindsight relabelling (``HindsightSampler``) against hand-computed cases, the bit-flipping
environment, the data path's refusal where ``get_batch`` would not be called, and the deprecated
``HindsightReplayBuffer``."""

import pytest
import torch

from rlf import nest
from rlf.algorithms import DQNAlgorithm, TrainerConfig, TrainingLoop, build_training
from rlf.data_structures import Experience, StepType, TimeStep, time_step_spec
from rlf.environments import load
from rlf.replay import HindsightReplayBuffer, HindsightSampler, PrioritizedSampler, ReplayBuffer
from rlf.tensor_specs import BoundedTensorSpec, TensorSpec
from rlf.unrollers import SyncUnroller
from rlf.utils import distributed
from rlf.utils.errors import UserError

# Observations [achieved (2), desired (2)]; one environment.
ACTION = BoundedTensorSpec((), torch.int64, 0, 1)
SPEC = Experience(time_step=time_step_spec(TensorSpec((4,)), ACTION, TensorSpec(()))._replace(
    env_info={}), action=ACTION, rollout_info=(), state=())


def _buffer(her_proportion=1.0, sampler=None):
    buffer = ReplayBuffer(SPEC, 1, 16, sampler=HindsightSampler(
        achieved_goal=(0, 2), desired_goal=(2, 4), her_proportion=her_proportion,
        sampler=sampler))
    # Episode 1: achieved goals (0,0) (1,0) (1,1) (2,1), LAST at the fourth step, desired
    # (9,9); then episode 2 starts: (5,5) (6,6).
    achieved = [(0, 0), (1, 0), (1, 1), (2, 1), (5, 5), (6, 6)]
    types = [StepType.FIRST, StepType.MID, StepType.MID, StepType.LAST, StepType.FIRST,
             StepType.MID]
    for (a, b), t in zip(achieved, types):
        ts = TimeStep(step_type=torch.tensor([int(t)], dtype=torch.int32),
                      reward=torch.tensor([-1.0]), discount=torch.tensor([1.0]),
                      observation=torch.tensor([[a, b, 9.0, 9.0]]),
                      prev_action=torch.zeros(1, dtype=torch.int64),
                      env_id=torch.zeros(1, dtype=torch.int32), env_info={})
        buffer.add_batch(Experience(time_step=ts, action=torch.zeros(1, dtype=torch.int64),
                                    rollout_info=(), state=()))
    return buffer


def _sequences(buffer, starts, length=2):
    env = torch.zeros(len(starts), dtype=torch.int64)
    positions = torch.tensor(starts)
    return buffer.get_batch_by_indices(env, positions, length), env, positions


def test_a_relabelled_sequence_takes_a_goal_its_episode_achieves_later():
    buffer = _buffer()
    batch, env, positions = _sequences(buffer, [0] * 200)  # steps 0, 1 of episode 1
    torch.manual_seed(0)
    out = buffer.sampler.relabel(batch, env, positions)
    goals = out.time_step.observation[:, 0, 2:]
    assert torch.equal(goals, out.time_step.observation[:, 1, 2:])  # one goal per sequence
    # future steps 1..3 of the same episode (never episode 2's (5,5) or (6,6))
    seen = {tuple(g.tolist()) for g in goals}
    assert seen == {(1.0, 0.0), (1.0, 1.0), (2.0, 1.0)}
    # the reward of each step: 0 where its achieved goal is the new goal, else -1; the
    # discount: 0 there (the episode would end), 1 elsewhere
    reached = (out.time_step.observation[..., :2] == out.time_step.observation[..., 2:]).all(-1)
    assert torch.equal(out.time_step.reward, reached.float() - 1.0)
    assert torch.equal(out.time_step.discount, (~reached).float())
    # the transition 0 -> 1 reaches its goal exactly when the goal is step 1's (1, 0)
    assert torch.equal(out.time_step.reward[:, 1] == 0, (goals == torch.tensor([1.0, 0.0])).all(-1))
    # the stored achieved goals are untouched
    assert torch.equal(out.time_step.observation[..., :2], batch.time_step.observation[..., :2])


def test_the_last_step_of_an_episode_relabels_with_its_own_goal_and_the_rest_stay():
    buffer = _buffer()
    batch, env, positions = _sequences(buffer, [2], 2)  # steps 2, 3 (LAST)
    out = buffer.sampler.relabel(batch, env, positions)
    assert out.time_step.observation[0, :, 2:].tolist() == [[2.0, 1.0], [2.0, 1.0]]
    assert out.time_step.reward[0].tolist() == [-1.0, 0.0]
    assert out.time_step.discount[0].tolist() == [1.0, 0.0]
    none = _buffer(her_proportion=0.0)
    batch, env, positions = _sequences(none, [0, 1])
    unchanged = none.sampler.relabel(batch, env, positions)
    assert unchanged is batch


def test_sampled_batches_are_relabelled_and_bad_slices_refused():
    buffer = _buffer()
    batch, info = buffer.get_batch(64, 2)
    assert not (batch.time_step.observation[..., 2:] == 9.0).any()  # every goal relabelled
    with pytest.raises(ValueError, match=r"^ReplayBuffer: achieved_goal \(0, 3\) and "
                                         r"desired_goal \(2, 4\) must be slices of the same "
                                         r"size"):
        ReplayBuffer(SPEC, 1, 4, sampler=HindsightSampler(achieved_goal=(0, 3),
                                                          desired_goal=(2, 4)))
    with pytest.raises(ValueError, match="her_proportion must be in"):
        HindsightSampler(achieved_goal=(0, 2), desired_goal=(2, 4), her_proportion=1.5)


def test_relabelled_prioritised_draws_keep_their_weights_and_take_priorities():
    buffer = _buffer(sampler=PrioritizedSampler(alpha=1.0, beta=1.0))
    assert buffer.sampler.prioritized and buffer.sampler.relabels
    buffer.update_priority(torch.tensor([0]), torch.tensor([4]), torch.tensor([1e6]))
    batch, info = buffer.get_batch(32, 2)
    assert (info.positions == 4).float().mean() > 0.9  # drawn by priority
    assert not (batch.time_step.observation[..., 2:] == 9.0).any()  # and relabelled
    assert info.importance_weights.max() == 1.0


def test_the_deprecated_hindsight_replay_buffer_relabels_as_the_sampler_does():
    with pytest.warns(DeprecationWarning, match="HindsightReplayBuffer is deprecated"):
        old = HindsightReplayBuffer(SPEC, 1, 16, achieved_goal=(0, 2), desired_goal=(2, 4),
                                    her_proportion=1.0)
    new = _buffer()
    for t in range(6):  # the same steps
        old.add_batch(nest_row(new, t))
    torch.manual_seed(5)
    old_batch, old_info = old.get_batch(16, 2)
    torch.manual_seed(5)
    new_batch, new_info = new.get_batch(16, 2)
    assert torch.equal(old_info.positions, new_info.positions)
    assert torch.equal(old_batch.time_step.observation, new_batch.time_step.observation)
    assert isinstance(old.sampler, HindsightSampler)


def nest_row(buffer, t):
    """Step ``t`` of ``buffer``'s one environment, as ``add_batch`` takes it."""
    batch = buffer.get_batch_by_indices(torch.tensor([0]), torch.tensor([t]), 1)
    return nest.map_structure(lambda x: x[:, 0], batch)


@pytest.mark.parametrize("settings, learners, line", [
    (dict(whole_replay_buffer_training=True), 1,
     "HindsightSampler relabels in get_batch, which TrainerConfig."
     "whole_replay_buffer_training = True does not call (it reads the buffer with "
     "gather_all); train from sampled mini-batches with one learner, or sample without "
     "relabelling"),
    (dict(mini_batch_size=4, mini_batch_length=2), 2,
     "HindsightSampler relabels in get_batch, which TrainerConfig."
     "num_learners = 2 does not call (it reads the buffer with get_batch_shard); train "
     "from sampled mini-batches with one learner, or sample without relabelling"),
])
def test_a_path_that_would_not_call_get_batch_refuses_it_before_anything_runs(
        settings, learners, line):
    env = load("rlf/BitFlipping-v0", 2, seed=0, num_bits=4)
    her = HindsightSampler(achieved_goal=(0, 4), desired_goal=(4, 8))
    alg = DQNAlgorithm(env.observation_spec(), env.action_spec(), env=env,
                       config=TrainerConfig(unroll_length=4, replay_sampler=her, **settings),
                       optimizer=torch.optim.Adam)
    with pytest.raises(UserError) as refused:  # (a world of two learners, no messages)
        TrainingLoop(alg, SyncUnroller(env, alg), world=distributed.World(0, learners))
    assert str(refused.value) == line
    assert alg.get_env_steps() == 0
    env.close()


def test_a_relabelling_sampler_relabels_the_runs_offline_data_too(tmp_path):
    env = load("rlf/BitFlipping-v0", 2, seed=0, num_bits=4)

    def dqn(**config):
        return DQNAlgorithm(env.observation_spec(), env.action_spec(), env=env,
                            optimizer=torch.optim.Adam, config=TrainerConfig(
                                mini_batch_size=8, mini_batch_length=2, **config))

    online = dqn(unroll_length=8)
    loop = build_training(online, SyncUnroller(env, online))
    for _ in range(3):
        loop.train_iter()
    path = tmp_path / "bits.pt"
    torch.save({"algorithm": loop.replay_buffer_state_dict()}, path)
    her = HindsightSampler(achieved_goal=(0, 4), desired_goal=(4, 8), her_proportion=1.0)
    offline = build_training(dqn(unroll_length=0, offline_buffer_dir=str(path),
                                 replay_sampler=her)).offline_replay_buffer
    plain = build_training(dqn(unroll_length=0, offline_buffer_dir=str(path))
                           ).offline_replay_buffer
    assert isinstance(offline.sampler, HindsightSampler)
    assert not plain.sampler.relabels  # (without a relabelling sampler: uniform draws)
    batch, _ = offline.get_batch(64, 2)
    observation = batch.time_step.observation
    # every goal is one the episode achieved, and the reward says whether it was reached
    reached = (observation[..., :4] == observation[..., 4:8]).all(-1)
    assert torch.equal(batch.time_step.reward, reached.float() - 1.0)
    stored, _ = plain.get_batch(64, 2)
    assert not torch.equal(stored.time_step.observation[..., 4:8], observation[..., 4:8])
    env.close()
