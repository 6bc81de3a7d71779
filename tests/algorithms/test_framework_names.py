"""The base classes keep their state in ``_rlf_*`` names a subclass would not use: a subclass's
own ``_actor``, ``_critic`` and counters stay its own (also on an actor's copy), a subclass that
assigns a name of the base classes' state is refused in one line, 0.1 members reach through
``super()``, and ``train_iter`` is the algorithm's own (ALF's entry point)."""

import functools
import warnings
from pathlib import Path

import pytest
import torch
from torch import nn

from rlf.algorithms import PPOAlgorithm, RLAlgorithm, SACAlgorithm, TrainerConfig, TrainingLoop
from rlf.algorithms import build_training
from rlf.data_structures import AlgStep, LossInfo
from rlf.environments import load
from rlf.unrollers import SyncUnroller
from rlf.unrollers.actor_params import ActorIdentity
from rlf.utils.errors import UserError
from rlf.algorithms import loop_of
from tests.algorithms._learners import learner_of

ALF_FILE = Path(__file__).resolve().parents[1] / "data" / "alf_pendulum_sac_replay_buffer.pt"
ADAM = functools.partial(torch.optim.Adam, lr=1e-3)


class OwnNames(RLAlgorithm):
    """A user's actor-critic that keeps its networks in ``_actor``/``_critic`` and counts its
    own updates in ``_num_updates``, ``_loop`` and ``_env``."""

    def __init__(self, env, config):
        super().__init__(env.observation_spec(), env.action_spec(), env=env, config=config,
                         is_on_policy=True, optimizer=ADAM, name="OwnNames")
        self._actor, self._critic = nn.Linear(4, 2), nn.Linear(4, 1)
        self._num_updates = 0
        self._loop = "mine"
        self._env = "mine too"

    def rollout_step(self, time_step, state):
        dist = torch.distributions.Categorical(logits=self._actor(time_step.observation))
        action = dist.sample()
        value = self._critic(time_step.observation).squeeze(-1)
        return AlgStep(output=action, state=state,
                       info=(dist.log_prob(action), value, time_step.reward))

    def calc_loss(self, info):
        log_prob, value, reward = info
        return LossInfo(loss=-(log_prob * (reward - value).detach()) + (reward - value) ** 2)

    def after_update(self, root_inputs, info):
        self._num_updates += 1


def test_a_subclass_keeps_its_own_actor_critic_and_counters_also_as_an_actor_copy():
    env = load("CartPole-v1", 2, seed=0)
    alg = OwnNames(env, TrainerConfig(unroll_length=4))
    alg.actor_identity = ActorIdentity(1, 2)  # what build_actor does in an actor
    assert isinstance(alg._actor, nn.Module) and alg.actor_identity == (1, 2)
    for _ in range(3):
        alg.train_iter()
    assert alg._num_updates == alg.num_updates == 3
    assert (alg._loop, alg._env) == ("mine", "mine too")
    assert isinstance(loop_of(alg), TrainingLoop)
    env.close()


def test_the_built_in_actor_networks_take_an_actor_identity():
    env = load("Pendulum-v1", 1, seed=0)
    sac = SACAlgorithm(env.observation_spec(), env.action_spec(), actor_optimizer=ADAM,
                       critic_optimizer=ADAM, alpha_optimizer=ADAM)
    sac.actor_identity = ActorIdentity(0, 1)
    assert isinstance(sac.actor, nn.Module) and sac.actor_identity.index == 0
    env.close()


class _Assigns(RLAlgorithm):
    def __init__(self, name, value):
        super().__init__(load("CartPole-v1", 1).observation_spec(),
                         load("CartPole-v1", 1).action_spec(), is_on_policy=True)
        setattr(self, name, value)


@pytest.mark.parametrize("name", ["_rlf_learner", "_rlf_actor_identity", "_reward_weights"])
def test_assigning_a_name_of_the_base_classes_state_is_one_line_naming_it(name):
    with pytest.raises(UserError) as e:
        _Assigns(name, None)
    assert f"'{name}' takes a name that holds the state of rlf's Algorithm" in str(e.value)
    assert "\n" not in str(e.value)


def test_defining_a_name_of_the_base_classes_state_is_one_line_naming_it():
    class Defines(_Assigns):
        def _rlf_probe_rollout_step(self):
            return None

    with pytest.raises(UserError, match="Defines: the member '_rlf_probe_rollout_step'"):
        Defines("x", 1)


class OwnLayout(SACAlgorithm):
    """A SAC variant that reads offline files in its own layout through ``super()``."""

    def offline_layout(self):
        layout = super().offline_layout()
        spec = layout.spec
        return layout._replace(spec=spec._replace(
            time_step=spec.time_step._replace(env_id=spec.time_step.env_id)))


def test_an_offline_layout_calling_super_loads_alfs_file_and_trains_without_a_warning():
    env = load("Pendulum-v1", 1, seed=0)
    config = TrainerConfig(unroll_length=0, offline_buffer_dir=str(ALF_FILE),
                           offline_normalized_actions=True, mini_batch_size=16,
                           mini_batch_length=2, num_iterations=3)
    alg = OwnLayout(env.observation_spec(), env.action_spec(), actor_optimizer=ADAM,
                    critic_optimizer=ADAM, alpha_optimizer=ADAM, config=config)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(3):
            alg.train_iter()
    assert alg.num_updates == 3 and loop_of(alg).offline_replay_buffer.total_size > 0
    loaded = loop_of(alg).offline_replay_buffer
    with pytest.warns(DeprecationWarning, match=r"^TrainingLoop.load_offline_data is "
                                                r"deprecated .*; use no call \(building the "
                                                r"loop loads the offline data"):
        loop_of(alg).load_offline_data()  # built with the loop: nothing is loaded twice
    assert loop_of(alg).offline_replay_buffer is loaded
    env.close()


def _ppo(env):
    torch.manual_seed(0)
    return PPOAlgorithm(env.observation_spec(), env.action_spec(), env=env,
                        config=TrainerConfig(unroll_length=8, mini_batch_size=4,
                                             num_updates_per_train_iter=2),
                        optimizer=ADAM)


def test_train_iter_unrolls_the_algorithms_own_env_as_the_training_loop_does():
    env = load("CartPole-v1", 2, seed=0)
    alg = _ppo(env)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no deprecation, no other warning
        for _ in range(4):
            alg.train_iter()
    assert alg.get_env_steps() > 0 and alg.num_updates == 4 * 2  # iterations x epochs
    other_env = load("CartPole-v1", 2, seed=0)
    other = _ppo(other_env)
    loop = build_training(other, SyncUnroller(other_env, other))
    for _ in range(4):
        loop.train_iter()
    assert other.get_env_steps() == alg.get_env_steps()
    for (name, a), b in zip(alg.state_dict().items(), other.state_dict().values()):
        if isinstance(a, torch.Tensor):
            assert torch.equal(a, b), name
    env.close()
    other_env.close()


def test_train_iter_without_a_config_is_one_line():
    env = load("CartPole-v1", 1)
    alg = PPOAlgorithm(env.observation_spec(), env.action_spec(), optimizer=ADAM)
    with pytest.raises(UserError, match="train_iter needs the algorithm built with config="):
        alg.train_iter()
    env.close()


class Relabels(OwnNames):
    """A store-time relabelling written for rlf 0.1."""

    def observe_for_replay(self, exp):
        super().observe_for_replay(exp._replace(time_step=exp.time_step._replace(
            reward=exp.time_step.reward * 0)))


def test_a_0_1_store_time_relabelling_is_refused_at_construction():
    env = load("CartPole-v1", 1)
    with pytest.raises(UserError, match="Relabels.observe_for_replay calls "
                                        r"super\(\)\.observe_for_replay: since rlf 0\.2"):
        Relabels(env, TrainerConfig(unroll_length=4))
    env.close()


def test_a_call_of_a_built_in_observe_for_replay_is_kept():
    from rlf.algorithms import ImpalaAlgorithm

    class Counts(ImpalaAlgorithm):
        calls = 0

        def observe_for_replay(self, exp):
            type(self).calls += 1
            super().observe_for_replay(exp)

    env = load("CartPole-v1", 1, seed=0)
    alg = Counts(env.observation_spec(), env.action_spec(), optimizer=ADAM, env=env,
                 config=TrainerConfig(unroll_length=4, whole_replay_buffer_training=True,
                                      clear_replay_buffer=True),
                 experience_replay_fraction=0.5)
    with pytest.warns(DeprecationWarning, match=r"^Counts\.observe_for_replay is deprecated"):
        alg.train_iter()
    # the override ran on every step, and the built-in it calls stored each in the memory
    assert Counts.calls == 4
    assert alg.experience_replay_memory.total_size == 4
    env.close()


def test_a_module_added_after_construction_is_one_line_naming_the_documented_way():
    env = load("CartPole-v1", 1)

    class Lazy(OwnNames):
        def after_train_iter(self, root_inputs, rollout_info=None):
            self.memory = nn.Linear(1, 1)

    alg = Lazy(env, TrainerConfig(unroll_length=4))
    with pytest.raises(UserError, match="Lazy: the module 'memory' is added after "
                                        "construction.*'A memory of your own'"):
        alg.train_iter()
    alg._actor = nn.Linear(4, 2)  # replacing one it has is not adding one
    env.close()


def test_a_loss_over_no_transition_is_one_line_naming_mini_batch_length():
    import examples.minimal_dqn as minimal

    env = load("CartPole-v1", 1, seed=0)
    config = TrainerConfig(unroll_length=4, mini_batch_size=4, mini_batch_length=1,
                           initial_collect_steps=8)
    alg = minimal.MinimalDQN(env.observation_spec(), env.action_spec(), env=env,
                             optimizer=ADAM, config=config)
    # Its declared needs (DataNeeds): refused as the loop is built, before anything runs.
    with pytest.raises(UserError, match=r"^MinimalDQN: a loss over transitions needs sequences "
                                        r"of burn_in_steps \+ 2 steps; set TrainerConfig."
                                        r"mini_batch_length = 2 \(it is 1\)$"):
        alg.train_iter()
    assert loop_of(alg) is None and alg.num_updates == 0
    # An algorithm that declares nothing: the learner's line at the update.
    valid = torch.ones(1, 4)
    with pytest.raises(UserError, match="MinimalDQN.calc_loss gave a loss over 0 steps of "
                                        "sequences of 1 steps: a loss over transitions needs "
                                        "TrainerConfig.mini_batch_length >= 2"):
        learner_of(alg).update_with_gradient(LossInfo(loss=torch.zeros(0, 4)), valid)
    env.close()


def test_prioritised_replay_with_offline_data_is_one_line():
    from rlf.algorithms import DQNAlgorithm
    env = load("CartPole-v1", 1)
    config = TrainerConfig(unroll_length=1, offline_buffer_dir="x.pt", priority_replay=True,
                           mini_batch_size=4, mini_batch_length=2)
    alg = DQNAlgorithm(env.observation_spec(), env.action_spec(), env=env, config=config,
                       optimizer=ADAM)
    with pytest.raises(UserError, match=r"priority_replay = True with offline data: the "
                                        r"offline_fraction = 0.5 of each hybrid"):
        alg.train_iter()
    # Offline alone: the offline data is drawn uniformly, so no priority would be used.
    offline = DQNAlgorithm(env.observation_spec(), env.action_spec(), optimizer=ADAM,
                           config=TrainerConfig(unroll_length=0, offline_buffer_dir="x.pt",
                                                priority_replay=True, mini_batch_size=4,
                                                mini_batch_length=2))
    with pytest.raises(UserError, match=r"^TrainerConfig.priority_replay = True with "
                                        r"offline-only training \(unroll_length = 0\): the "
                                        r"offline data is drawn uniformly, so no priority would "
                                        r"be used; remove TrainerConfig.priority_replay$"):
        offline.train_iter()
    env.close()


def test_sequences_mixed_into_a_prioritised_batch_are_one_line():
    from rlf.algorithms import DQNAlgorithm
    from rlf.nest.utils import cat_nests

    class Mixes(DQNAlgorithm):
        def mix_experience(self, experience, batch_info):
            return cat_nests([experience, experience]), batch_info

    env = load("CartPole-v1", 2, seed=0)
    config = TrainerConfig(unroll_length=4, priority_replay=True, mini_batch_size=4,
                           mini_batch_length=2, initial_collect_steps=8)
    alg = Mixes(env.observation_spec(), env.action_spec(), env=env, config=config,
                optimizer=ADAM)
    with pytest.raises(UserError, match="Mixes.mix_experience appended 4 sequences to a "
                                        "prioritised mini-batch of 4"), pytest.warns(
            DeprecationWarning, match=r"Mixes.mix_experience is deprecated .* use "
                                      r"experience_sources\(\)"):
        for _ in range(4):
            alg.train_iter()
    env.close()


@pytest.mark.parametrize("settings, line", [
    (dict(priority_replay=True, mini_batch_size=4, mini_batch_length=2),
     "DQNAlgorithm's experience sources ['model'] append sequences to prioritised "
     "mini-batches, "
     "where they have no importance weight and no priority; remove "
     "TrainerConfig.priority_replay (or the sources)"),
])
def test_experience_sources_where_they_cannot_mix_are_one_line(settings, line):
    from rlf.algorithms import DQNAlgorithm, ExperienceSource

    class Sources(DQNAlgorithm):
        def experience_sources(self):
            return (ExperienceSource("model", lambda experience, k: None, 0.5),)

    env = load("CartPole-v1", 2, seed=0)
    alg = Sources(env.observation_spec(), env.action_spec(), env=env,
                  config=TrainerConfig(unroll_length=4, **settings), optimizer=ADAM)
    with pytest.raises(UserError) as refused:
        alg.train_iter()
    assert str(refused.value) == line and alg.get_env_steps() == 0
    env.close()


def test_experience_sources_on_the_rollout_graph_are_one_line():
    from rlf.algorithms import ExperienceSource, ImpalaAlgorithm

    class Sources(ImpalaAlgorithm):
        def experience_sources(self):
            return (ExperienceSource("model", lambda experience, k: None, 0.5),)

    env = load("CartPole-v1", 2, seed=0)
    alg = Sources(env.observation_spec(), env.action_spec(), env=env, is_on_policy=True,
                  config=TrainerConfig(unroll_length=4), optimizer=ADAM)
    with pytest.raises(UserError, match=r"^ImpalaAlgorithm's experience sources \['model'\] "
                                        r"append sequences to mini-batches, which its data "
                                        r"path 'rollout_graph' has not"):
        alg.train_iter()
    env.close()


def test_a_mix_experience_dropping_a_prioritised_batchs_info_is_one_line():
    """IMPALA's way (``return mixed, None``) on a prioritised batch switched prioritised replay
    off without a word: every priority stayed at its first value."""
    from rlf.algorithms import DQNAlgorithm

    class Drops(DQNAlgorithm):
        def mix_experience(self, experience, batch_info):
            return experience, None

    env = load("CartPole-v1", 2, seed=0)
    config = TrainerConfig(unroll_length=4, priority_replay=True, mini_batch_size=4,
                           mini_batch_length=2, initial_collect_steps=8)
    alg = Drops(env.observation_spec(), env.action_spec(), env=env, config=config,
                optimizer=ADAM)
    with pytest.warns(DeprecationWarning, match=r"^Drops\.mix_experience is deprecated"), \
            pytest.raises(UserError, match=r"^Drops.mix_experience returned batch_info None "
                                           r"for a prioritised mini-batch: .*remove "
                                           r"TrainerConfig.priority_replay$"):
        for _ in range(4):
            alg.train_iter()
    env.close()
