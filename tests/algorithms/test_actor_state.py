"""What actors receive and who they are: ``actor_state_dict`` holds the acting modules only
(no critics, no target networks), a copy loaded from it acts as the learner does, and
DQN's Ape-X per-actor epsilons."""

import functools

import pytest
import torch

from rlf.algorithms import DQNAlgorithm, SACAlgorithm, TD3Algorithm, TrainerConfig
from rlf.algorithms.dqn import apex_epsilon
from rlf.environments import load
from rlf.unrollers.actor_params import ActorIdentity, actor_state_dict
from tests.algorithms._learners import learner_of

ADAM = functools.partial(torch.optim.Adam, lr=1e-3)
CASES = {
    "sac": ("Pendulum-v1", SACAlgorithm,
            dict(actor_optimizer=ADAM, critic_optimizer=ADAM, alpha_optimizer=ADAM)),
    "td3": ("Pendulum-v1", TD3Algorithm, dict(actor_optimizer=ADAM, critic_optimizer=ADAM)),
    "dqn": ("CartPole-v1", DQNAlgorithm, dict(optimizer=ADAM, epsilon_greedy=0.0)),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_actors_receive_no_critic_or_target_tensors_and_act_as_the_learner(name):
    env_name, ctor, kw = CASES[name]
    env = load(env_name, 3, seed=0)
    torch.manual_seed(0)
    learner = ctor(env.observation_spec(), env.action_spec(), **kw)
    torch.manual_seed(1)
    actor = ctor(env.observation_spec(), env.action_spec(), **kw)
    sent = actor_state_dict(learner)
    assert not [k for k in sent if "critic" in k or "target" in k or k.startswith("_metrics")]
    everything = [k for k, v in learner.state_dict().items() if isinstance(v, torch.Tensor)]
    assert len(sent) < len(everything)
    if name != "dqn":  # act as after the first update (not uniformly at random)
        learner_of(learner).counters.num_updates = 1  # the actor receives it with the parameters
    for k, v in actor_state_dict(actor).items():
        v.data.copy_(sent[k])  # what an actor unroller does
    assert actor.num_updates == learner.num_updates
    time_step = env.reset()
    for a in (learner, actor):
        torch.manual_seed(7)
        a.out = a.rollout_step(time_step, a.get_initial_rollout_state(3)).output
    assert torch.equal(learner.out, actor.out)
    env.close()


def test_apex_epsilons_follow_the_papers_formula():
    # Horgan et al. 2018: eps_i = 0.4 ** (1 + 7 i / (N - 1))
    assert [apex_epsilon(i, 8) for i in (0, 7)] == pytest.approx([0.4, 0.4 ** 8])
    assert apex_epsilon(3, 8) == pytest.approx(0.4 ** (1 + 7 * 3 / 7))
    assert apex_epsilon(0, 1) == 0.4


def test_dqn_actor_copies_explore_at_their_own_rate_and_the_learner_at_the_schedule():
    env = load("CartPole-v1", 2, seed=0)
    kw = dict(optimizer=ADAM, epsilon_greedy=[(0, 1.0), (100, 0.1)], actor_epsilons=(0.4, 7.0))
    learner = DQNAlgorithm(env.observation_spec(), env.action_spec(), **kw)
    actors = [DQNAlgorithm(env.observation_spec(), env.action_spec(), **kw) for _ in range(4)]
    for i, a in enumerate(actors):
        a.actor_identity = ActorIdentity(i, 4)
        a.rollout_step(env.reset(), ())
        assert float(a._behaviour_epsilon) == pytest.approx(0.4 ** (1 + 7 * i / 3))
    learner.rollout_step(env.reset(), ())
    assert float(learner._behaviour_epsilon) == 1.0  # the schedule at step 0
    with pytest.raises(ValueError, match="actor_epsilons is"):
        DQNAlgorithm(env.observation_spec(), env.action_spec(), actor_epsilons=(1.5, 7.0))
    # Without actors the learner's own unroll follows the schedule: the rates would be unused.
    with pytest.raises(ValueError, match=r"DQNAlgorithm: actor_epsilons = \(0.4, 7.0\) takes "
                                         r"effect only with actors .*set "
                                         r"TrainerConfig.async_unroll = True too, or remove it"):
        DQNAlgorithm(env.observation_spec(), env.action_spec(), env=env,
                     config=TrainerConfig(), **kw)
    DQNAlgorithm(env.observation_spec(), env.action_spec(), env=env,
                 config=TrainerConfig(async_unroll=True, num_actors=2), **kw)
    with pytest.raises(ValueError, match=r"actor index 4 is not in \[0, 4\)"):
        learner.actor_identity = ActorIdentity(4, 4)
    env.close()
