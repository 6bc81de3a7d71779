"""The algorithm contract: ``RLAlgorithm``'s public members are the policy, its hooks, its specs,
the optimizer declarations and the counters; what rlf 0.1 had beside them is gone since 0.3, and
reading it, or overriding a hook of it, says what replaces it."""

import ast
import functools
import gc
import weakref
from pathlib import Path

import pytest
import torch
from torch import nn

import rlf

from rlf.algorithms import (DQNAlgorithm, RLAlgorithm, TrainerConfig, TrainingLoop,
                            build_training, loop_of, own_method, run_args)
from rlf.algorithms.removed import REMOVED_HOOKS, REMOVED_MEMBERS
from rlf.data_structures import AlgStep
from rlf.environments import load
from rlf.unrollers import SyncUnroller
from rlf.utils.errors import UserError

CONTRACT = {
    # the policy
    "rollout_step", "predict_step", "train_step", "calc_loss",
    # the hooks
    "preprocess_experience", "experience_sources", "after_update",
    "after_train_iter", "train_state_from_rollout_state", "get_initial_rollout_state",
    "get_initial_predict_state", "get_initial_train_state", "actor_modules", "offline_layout",
    # the specs
    "observation_spec", "action_spec", "reward_spec", "rollout_state_spec", "train_state_spec",
    "predict_state_spec",
    # optimizers and counters
    "add_optimizer", "is_due", "num_updates", "get_env_steps",
    # what it needs of the data path
    "data_needs",
    # who it is
    "name", "on_policy", "actor_identity", "weighted_reward",
    # ALF's entry point
    "train_iter",
}


def _public(cls):
    return {n for n in dir(cls) if not n.startswith("_")} - set(dir(nn.Module))


def test_rl_algorithm_has_30_public_members_and_none_of_the_removed_ones():
    assert _public(RLAlgorithm) == CONTRACT and len(CONTRACT) <= 30
    assert not CONTRACT & REMOVED_MEMBERS.keys()


def _dqn(**config):
    env = load("CartPole-v1", 2, seed=0)
    config = TrainerConfig(unroll_length=4, mini_batch_size=4, mini_batch_length=2,
                           initial_collect_steps=8, **config)
    torch.manual_seed(0)
    alg = DQNAlgorithm(env.observation_spec(), env.action_spec(), env=env, config=config,
                       optimizer=functools.partial(torch.optim.Adam, lr=1e-3))
    return alg, env


def test_reading_a_removed_member_names_its_replacement():
    alg, env = _dqn()
    loop = build_training(alg, SyncUnroller(env, alg))
    loop.train_iter()
    for name, replacement in sorted(REMOVED_MEMBERS.items()):
        with pytest.raises(AttributeError) as raised:
            getattr(alg, name)
        assert str(raised.value) == (f"'DQNAlgorithm' object has no attribute '{name}' "
                                     f"(removed in rlf 0.3; use {replacement})")
        assert not hasattr(alg, name)
    with pytest.raises(AttributeError, match="has no attribute 'no_such_member'$"):
        alg.no_such_member  # noqa: B018
    env.close()


def test_the_replacements_train_as_the_loop_does():
    """What the messages name works: ``set_unroller(u); train_iter()`` of 0.1 is the loop's."""
    alg, env = _dqn()
    loop = TrainingLoop(alg)
    loop.set_unroller(SyncUnroller(env, alg))
    for _ in range(6):
        alg.train_iter()  # trains through the loop built over it
    assert loop_of(alg) is loop and alg.num_updates > 0
    assert alg.get_env_steps() == loop.env_steps > 0
    assert loop.replay_buffer.total_size == 6 * 4 * 2
    assert loop.learner.optimizers and loop.learner.names == ["default"]
    env.close()


@pytest.mark.parametrize("name", ["learner", "run_args", "training_loop"])
def test_a_member_deprecated_in_0_4_warns_once_and_answers_as_before(name):
    """``learner``, ``run_args`` and ``training_loop`` left the contract (what trains the
    algorithm holds them); for one release each still answers, warning once with its
    replacement."""
    alg, env = _dqn()
    loop = build_training(alg, SyncUnroller(env, alg))
    with pytest.warns(DeprecationWarning, match=rf"^DQNAlgorithm\.{name} is deprecated .*; use "):
        value = getattr(alg, name)
    assert value is {"learner": loop.learner, "run_args": value,
                     "training_loop": loop}[name]
    if name == "run_args":
        assert value == run_args(alg) and value.env is env
    assert not hasattr(RLAlgorithm, name)
    env.close()


def test_the_algorithm_holds_no_loop_built_over_it():
    """A loop built over an algorithm is found, not held: once what built it lets it go, the
    algorithm reaches none and its ``train_iter`` is one line rather than a second loop; an
    algorithm that no loop was built over builds (and keeps) its own."""
    alg, env = _dqn()
    loop = build_training(alg, SyncUnroller(env, alg))
    loop.train_iter()
    assert loop_of(alg) is loop
    assert not [v for v in vars(alg).values() if isinstance(v, TrainingLoop)]
    gone = weakref.ref(loop)
    del loop
    gc.collect()
    assert gone() is None and loop_of(alg) is None
    with pytest.raises(UserError, match=r"^DQNAlgorithm: the TrainingLoop built over it is no "
                                        r"longer held, so train_iter would start another; "
                                        r"keep it \(loop = build_training\(...\)\) and call "
                                        r"loop.train_iter\(\)$"):
        alg.train_iter()
    env.close()
    alg, env = _dqn()
    alg.train_iter()  # ALF's entry: its own loop, over its own env
    own = loop_of(alg)
    assert isinstance(own, TrainingLoop) and own.replay_buffer.total_size == 4 * 2
    alg.train_iter()
    assert loop_of(alg) is own
    env.close()


def _rollout_step(self, time_step, state):
    return AlgStep(output=torch.zeros(time_step.step_type.shape, dtype=torch.int64), info=())


@pytest.mark.parametrize("hook", sorted(REMOVED_HOOKS))
def test_a_subclass_overriding_a_removed_hook_is_refused_at_construction(hook):
    old_style = type("OldStyle", (RLAlgorithm,), {"rollout_step": _rollout_step,
                                                  hook: lambda self, *a: None})
    env = load("CartPole-v1", 1, seed=0)
    with pytest.raises(UserError) as raised:
        old_style(env.observation_spec(), env.action_spec())
    assert str(raised.value) == (f"OldStyle.{hook}: rlf 0.3 no longer calls this hook of rlf "
                                 f"0.1 (removed); use {REMOVED_HOOKS[hook]} (a method of your "
                                 f"own by this name: mark it @rlf.algorithms.own_method)")
    assert "\n" not in str(raised.value)
    # Its own subclass is refused by the same line (the class that defines it is named).
    with pytest.raises(UserError, match=f"^OldStyle.{hook}: "):
        type("Child", (old_style,), {})(env.observation_spec(), env.action_spec())
    env.close()


@pytest.mark.parametrize("hook", sorted(REMOVED_HOOKS))
def test_a_method_of_ones_own_by_a_removed_hooks_name_is_kept_when_marked(hook):
    """New code may use the names: a Dyna's ``unroll(model, steps)``, a ``get_metrics`` of
    one's own."""
    def mine(self, *args):
        return "mine"

    new_style = type("NewStyle", (RLAlgorithm,), {"rollout_step": _rollout_step,
                                                  hook: own_method(mine)})
    env = load("CartPole-v1", 1, seed=0)
    alg = new_style(env.observation_spec(), env.action_spec())
    assert getattr(alg, hook)(1, 2) == "mine"

    class AProperty(RLAlgorithm):
        rollout_step = _rollout_step

        @property
        @own_method
        def has_multidim_reward(self):
            return "mine"

    assert AProperty(env.observation_spec(), env.action_spec()).has_multidim_reward == "mine"
    env.close()


def test_a_property_of_a_removed_hook_is_refused_too():
    class OldStyle(RLAlgorithm):
        @property
        def trains_on_rollout_graph(self):
            return False

    env = load("CartPole-v1", 1, seed=0)
    with pytest.raises(UserError, match="rollout_graph_training"):
        OldStyle(env.observation_spec(), env.action_spec(), is_on_policy=True)
    env.close()


def _module_imports(path):
    """The rlf modules ``path`` imports at module level, and those each function imports."""
    tree = ast.parse(path.read_text())

    def named(nodes):
        found = set()
        for node in nodes:
            if isinstance(node, ast.ImportFrom) and node.module:
                found.add(node.module)
            elif isinstance(node, ast.Import):
                found.update(a.name for a in node.names)
        return {m for m in found if m.startswith("rlf")}

    functions = [f for f in ast.walk(tree) if isinstance(f, ast.FunctionDef)]
    in_functions = {id(n) for f in functions for n in ast.walk(f)}
    top = named(n for n in ast.walk(tree) if id(n) not in in_functions)
    inner = {f.name: named(ast.walk(f)) for f in functions if named(ast.walk(f))}
    return top, inner


def test_the_algorithm_imports_nothing_of_what_trains_it():
    """The algorithm is at the bottom: its modules import neither the learner, the loop, the
    data paths, the builder nor the unrollers; only ALF's entry (``train_iter``: the builder
    and ``SyncUnroller``) and the deprecated ``learner`` (``make_learner``) import, when
    called."""
    root = Path(rlf.__file__).parent / "algorithms"
    machinery = ("rlf.algorithms.learner", "rlf.algorithms.training_loop",
                 "rlf.algorithms.data_paths", "rlf.algorithms.builder", "rlf.unrollers")
    called = {}
    for name in ("algorithm.py", "rl_algorithm.py"):
        top, inner = _module_imports(root / name)
        assert not [m for m in top if m.startswith(machinery)], (name, sorted(top))
        called.update({f: sorted(m for m in ms if m.startswith(machinery))
                       for f, ms in inner.items()})
    assert {f: ms for f, ms in called.items() if ms} == {
        "_learner": ["rlf.algorithms.learner"],
        "train_iter": ["rlf.algorithms.builder", "rlf.unrollers"],
        "adjust_replay_buffer_length": ["rlf.algorithms.data_paths"]}
    alg, env = _dqn()
    assert not [v for v in vars(alg).values() if type(v).__name__ == "Learner"]
    env.close()


def test_a_learner_built_with_a_world_warns_and_takes_it():
    """``Learner.build(world)`` (rlf 0.3's way of handing the run's learners) still works, once
    warned: ``make_learner`` and ``build_training`` take the world when they make it."""
    from rlf.algorithms.learner import make_learner
    from rlf.utils import distributed
    alg, env = _dqn()
    learner = make_learner(alg)
    world = distributed.World()
    with pytest.warns(DeprecationWarning, match=r"^Learner.build\(world\) is deprecated .*; "
                                                r"use make_learner\(algorithm, config, world\)"):
        learner.build(world)
    assert learner.settings.world is world and learner.built
    assert make_learner(alg, world=world).settings.world is world
    assert learner.counters is make_learner(alg).counters  # the algorithm's, whichever learner
    env.close()


def test_a_script_loop_let_go_leaves_alfs_own_loop_training():
    alg, env = _dqn()
    alg.train_iter()  # ALF's own loop
    own = loop_of(alg)
    other = build_training(alg, SyncUnroller(env, alg))
    assert own is not None and loop_of(alg) is other
    del other
    gc.collect()
    alg.train_iter()  # ALF's own loop again: its buffer holds both iterations' steps
    assert own.replay_buffer.total_size == 2 * 4 * 2
    env.close()
