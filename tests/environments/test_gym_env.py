"""VectorEnvironment over gymnasium.make_vec, checked against plain single gymnasium envs."""

import re

import gymnasium as gym
import numpy as np
import pytest
import torch

from rlf import nest
from rlf.data_structures import StepType
from rlf.environments import load
from rlf.tensor_specs import validate_nest
from rlf.utils.errors import UserError

B = 3
MAX_STEPS = 12  # short enough that some episodes truncate, long enough that others terminate


def reference_trajectory(seed, actions):
    """Hand-written per-env loop over plain gymnasium.make: the semantics of docs/design.md."""
    out = []
    for i in range(B):
        env = gym.make("CartPole-v1", max_episode_steps=MAX_STEPS)
        obs, _ = env.reset(seed=seed + i)
        rows = [(obs, StepType.FIRST, 0.0, 1.0, 0)]
        needs_reset = False
        for a in actions[:, i]:
            if needs_reset:  # the action given at LAST is ignored; a new episode starts
                obs, _ = env.reset()
                rows.append((obs, StepType.FIRST, 0.0, 1.0, 0))
                needs_reset = False
                continue
            obs, r, term, trunc, _ = env.step(int(a))
            if term or trunc:
                rows.append((obs, StepType.LAST, r, 0.0 if term else 1.0, int(a)))
                needs_reset = True
            else:
                rows.append((obs, StepType.MID, r, 1.0, int(a)))
        out.append(rows)
    return out


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_cartpole_matches_reference(mode):
    rng = np.random.default_rng(0)
    actions = rng.integers(0, 2, size=(150, B))
    env = load("CartPole-v1", B, seed=10, max_episode_steps=MAX_STEPS, vectorization_mode=mode)
    spec = env.time_step_spec()
    steps = [env.reset()]
    for a in actions:
        steps.append(env.step(torch.from_numpy(a)))
    env.close()
    ref = reference_trajectory(10, actions)
    for t, ts in enumerate(steps):
        validate_nest(ts, spec, (B,), f"time step {t}")
        assert ts.env_id.tolist() == list(range(B))
        for i in range(B):
            obs, step_type, reward, discount, prev_action = ref[i][t]
            assert ts.step_type[i] == step_type, (t, i)
            assert ts.reward[i] == np.float32(reward), (t, i)
            assert ts.discount[i] == discount, (t, i)
            assert ts.prev_action[i] == prev_action, (t, i)
            np.testing.assert_array_equal(ts.observation[i].numpy(), obs)
    # the run saw both kinds of episode end, so both discounts were really checked
    last = torch.stack([ts.step_type for ts in steps]) == StepType.LAST
    discounts = torch.stack([ts.discount for ts in steps])[last]
    assert (discounts == 0).any() and (discounts == 1).any()
    # every LAST is followed by a FIRST
    types = torch.stack([ts.step_type for ts in steps])
    assert (types[1:][types[:-1] == StepType.LAST] == StepType.FIRST).all()


def test_same_seed_same_trajectory_different_seed_differs():
    def run(seed):
        env = load("CartPole-v1", B, seed=seed)
        obs = [env.reset().observation]
        for t in range(30):
            obs.append(env.step(torch.full((B,), t % 2, dtype=torch.int64)).observation)
        return torch.stack(obs)

    assert torch.equal(run(3), run(3))
    assert not torch.equal(run(3), run(4))


def test_wrappers_pass_through():
    env = load("CartPole-v1", 2, seed=0,
               wrappers=[lambda e: gym.wrappers.TransformReward(e, lambda r: 2.5 * r)])
    env.reset()
    assert env.step(torch.zeros(2, dtype=torch.int64)).reward.tolist() == [2.5, 2.5]


def test_specs():
    env = load("CartPole-v1", 2)
    assert env.batch_size == 2
    assert env.action_spec().num_values == 2 and env.action_spec().dtype == torch.int64
    assert env.observation_spec().shape == (4,)
    assert env.time_step_spec().prev_action == env.action_spec()
    ts = env.reset()
    assert nest.map_structure(lambda t: t.shape[0], ts).step_type == 2


def test_bad_input():
    with pytest.raises(ValueError, match="CartPole-v1"):
        load("CartPol-v1", 2)
    with pytest.raises(ValueError, match="closest registered ids"):
        load("CartPole-v9", 2)
    env = load("CartPole-v1", 2)
    with pytest.raises(RuntimeError, match="reset"):
        env.step(torch.zeros(2, dtype=torch.int64))
    env.reset()
    with pytest.raises(ValueError, match=r"expected shape \(2,\) dtype torch.int64"):
        env.step(torch.zeros(3, dtype=torch.int64))
    with pytest.raises(ValueError, match=r"dtype torch.int64.*got .*torch.float32"):
        env.step(torch.zeros(2))
    with pytest.raises(ValueError, match="num_envs"):
        load("CartPole-v1", 0)
    # Before, a negative seed failed only at the first reset, inside gymnasium.
    for seed in (-1, 1.5):
        with pytest.raises(ValueError, match=re.escape(
                f"VectorEnvironment(CartPole-v1): seed must be an integer >= 0 or None, got "
                f"{seed}")):
            load("CartPole-v1", 2, seed=seed)


@pytest.mark.parametrize("env_name", ["FrozenLake-v1", "Blackjack-v1"])
def test_discrete_and_tuple_observations_are_one_hot_float32_vectors(env_name):
    # A Discrete state (FrozenLake) or a tuple of them (Blackjack) reached the MLP as an
    # integer scalar or a tuple: an IndexError at the first forward pass, or an AttributeError.
    env = load(env_name, 2, seed=5)
    raw = [gym.make(env_name) for _ in range(2)]
    space = raw[0].observation_space
    n = gym.spaces.flatdim(space)
    assert env.observation_spec().shape == (n,)
    assert env.observation_spec().dtype == torch.float32
    observations = [e.reset(seed=5 + i)[0] for i, e in enumerate(raw)]
    ts = env.reset()
    for _ in range(6):
        expected = np.stack([gym.spaces.flatten(space, o) for o in observations])
        assert ts.observation.dtype == torch.float32
        np.testing.assert_array_equal(ts.observation.numpy(), expected.astype(np.float32))
        if bool((ts.step_type == StepType.LAST).any()):
            break
        action = torch.zeros(2, dtype=torch.int64)
        observations = [e.step(0)[0] for e in raw]
        ts = env.step(action)
    assert gym.spaces.flatten(space, observations[0]).sum() >= 1  # one-hot parts
    env.close()


def test_observations_are_kept_as_they_are_on_request():
    env = load("Blackjack-v1", 2, seed=0, flatten_observations=False)
    assert isinstance(env.observation_spec(), tuple) and len(env.observation_spec()) == 3
    assert env.reset().observation[0].dtype == torch.int64
    env.close()
    env = load("CartPole-v1", 2, seed=0, flatten_observations=True)  # a Box: already flat
    assert env.observation_spec().shape == (4,)
    env.close()
    with pytest.raises(ValueError, match="flatten_observations = True wraps each copy"):
        load("CartPole-v1", 2, flatten_observations=True, vectorization_mode="vector_entry_point")


def test_a_non_finite_reward_or_observation_is_refused_naming_the_environment():
    # Before, a NaN reached the loss and was reported as a learning-rate problem.
    nan_reward = gym.wrappers.TransformReward
    env = load("CartPole-v1", 3, seed=0, wrappers=[
        lambda e: nan_reward(e, lambda r: float("nan") if e.unwrapped.np_random.random() < 0.5
                             else r)])
    env.reset()
    with pytest.raises(UserError, match=r"environment CartPole-v1 returned the reward nan in "
                                        r"its copy \d; rlf needs finite rewards"):
        for _ in range(20):
            env.step(torch.zeros(3, dtype=torch.int64))
    inf_obs = lambda e: gym.wrappers.TransformObservation(  # noqa: E731
        e, lambda o: np.where(np.arange(4) == 2, np.inf, o).astype(np.float32),
        e.observation_space)
    env = load("CartPole-v1", 2, seed=0, wrappers=[inf_obs])
    with pytest.raises(UserError, match=r"returned the observation element inf in its copy 0; "
                                        r"rlf needs finite observations"):
        env.reset()
    # Finite values and integer observations go through.
    env = load("CartPole-v1", 2, seed=0)
    env.reset()
    assert env.step(torch.zeros(2, dtype=torch.int64)).reward.tolist() == [1.0, 1.0]


def test_an_observation_that_does_not_fit_the_declared_space_is_named():
    # Before, numpy's "Output array is the wrong shape" came out of gymnasium's batching.
    longer = lambda e: gym.wrappers.TransformObservation(  # noqa: E731
        e, lambda o: np.concatenate([o, o[:1]]), e.observation_space)
    env = load("CartPole-v1", 2, seed=0, wrappers=[longer])
    with pytest.raises(UserError, match=re.escape(
            "environment CartPole-v1: gymnasium could not batch the observations of its copies "
            "(Output array is the wrong shape): each must fit the declared observation_space "
            "Box(")):
        env.reset()

    class Failing(gym.Wrapper):
        def step(self, action):
            raise ValueError("the environment's own error")

    env = load("CartPole-v1", 2, seed=0, wrappers=[Failing])
    env.reset()
    with pytest.raises(ValueError, match="the environment's own error") as error:
        env.step(torch.zeros(2, dtype=torch.int64))
    assert not isinstance(error.value, UserError)


class _LongerInCopy1(gym.Wrapper):
    """Copy 1 (seeded 1) returns one element too many from its third step on."""

    def reset(self, **kwargs):
        self._copy, self._steps = kwargs.get("seed"), 0
        return self.env.reset(**kwargs)

    def step(self, action):
        observation, *rest = self.env.step(action)
        self._steps += 1
        if self._copy == 1 and self._steps >= 3:
            observation = np.concatenate([observation, observation[:1]])
        return (observation, *rest)


def test_an_observation_that_does_not_fit_is_named_from_a_subprocess():
    # In an async vector environment the copy failed where gymnasium writes its observation
    # into shared memory: numpy's broadcasting error, and the worker's traceback only in
    # gymnasium's log.
    env = load("CartPole-v1", 2, seed=0, wrappers=[_LongerInCopy1], vectorization_mode="async")
    try:
        env.reset()
        with pytest.raises(UserError, match=re.escape(
                "environment CartPole-v1 returned in its copy 1 an observation of shape (5,) "
                "that does not fit its observation_space Box(")):
            for _ in range(3):
                env.step(torch.zeros(2, dtype=torch.int64))
    finally:
        env.close()


def test_observation_mismatches_are_found_in_nests():
    from rlf.environments.gym_env import _observation_mismatch
    box = gym.spaces.Box(0, 1, (2,))
    space = gym.spaces.Dict({"a": box, "b": gym.spaces.Tuple([box, gym.spaces.Discrete(3)])})
    fits = {"a": np.zeros(2), "b": (np.zeros(2), 1)}
    assert _observation_mismatch(fits, space) is None
    assert _observation_mismatch({"a": np.zeros(3), "b": fits["b"]}, space) == \
        "['a']: shape (3,)"
    assert _observation_mismatch({"a": np.zeros(2), "b": (np.zeros((2, 1)), 1)}, space) == \
        "['b'][0]: shape (2, 1)"
    assert _observation_mismatch({"a": np.zeros(2)}, space) == "keys ['a']"
    assert _observation_mismatch({"a": np.zeros(2), "b": (np.zeros(2),)}, space) == \
        "['b']: a tuple of 1"
    assert _observation_mismatch(np.zeros(2), space) == "a ndarray"
    assert _observation_mismatch([[0.0], [0.0, 1.0]], gym.spaces.Box(0, 1, (2, 2))) == \
        "no shape (a ragged sequence)"


class _Pixels(gym.Env):
    """Distinct pixel values, so that a transposition shows."""

    def __init__(self, shape=(6, 5, 3)):
        self.observation_space = gym.spaces.Box(0, 255, shape, np.uint8)
        self.action_space = gym.spaces.Discrete(2)

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        return self._frame(), {}

    def step(self, action):
        return self._frame(), 0.0, False, False, {}

    def _frame(self):
        size = int(np.prod(self.observation_space.shape))
        return (np.arange(size) % 251).astype(np.uint8).reshape(self.observation_space.shape)


gym.register("RlfTestPixelsHWC-v0", entry_point=_Pixels)
gym.register("RlfTestPixelsCHW-v0", entry_point=_Pixels, kwargs={"shape": (3, 6, 5)})


def test_channels_last_images_are_moved_channels_first():
    # Before, (H, W, C) pixels reached NatureCNN as H channels of W x C: "too small for its
    # kernels", or a wrong network for large enough images.
    raw = _Pixels()._frame()
    env = load("RlfTestPixelsHWC-v0", 2, seed=0)
    assert env.observation_spec().shape == (3, 6, 5)
    obs = env.reset().observation
    assert obs.shape == (2, 3, 6, 5) and obs.dtype == torch.uint8
    assert np.array_equal(obs[1].numpy(), raw.transpose(2, 0, 1))
    assert env.get_state() is not None  # still picklable
    assert load("RlfTestPixelsCHW-v0", 1).observation_spec().shape == (3, 6, 5)
    assert load("RlfTestPixelsHWC-v0", 1, channels_first=False).observation_spec().shape == (
        6, 5, 3)
    assert load("RlfTestPixelsCHW-v0", 1, channels_first=True).observation_spec().shape == (
        5, 3, 6)
    with pytest.raises(UserError, match="channels_first = True wraps each copy"):
        load("CartPole-v1", 1, channels_first=True, vectorization_mode="vector_entry_point")


class _Float64Actions(gym.Env):
    """Declares float64 actions and keeps the last one it got."""

    observation_space = gym.spaces.Box(-1, 1, (2,), np.float32)
    action_space = gym.spaces.Box(-1, 1, (3,), np.float64)
    received = []

    def reset(self, seed=None, options=None):
        return np.zeros(2, np.float32), {}

    def step(self, action):
        _Float64Actions.received.append(action)
        return np.zeros(2, np.float32), 0.0, False, False, {}


gym.register("RlfTestFloat64Actions-v0", entry_point=_Float64Actions)


def test_a_float64_box_takes_float32_actions_and_hands_the_environment_float64():
    # Before, the spec said float64 and rlf's float32 networks' actions were refused.
    env = load("RlfTestFloat64Actions-v0", 2)
    spec = env.action_spec()
    assert spec.dtype == torch.float32 and spec.shape == (3,)
    assert np.array_equal(spec.minimum, -1.0) and np.array_equal(spec.maximum, 1.0)
    env.reset()
    env.step(torch.full((2, 3), 0.25))
    assert [a.dtype for a in _Float64Actions.received[-2:]] == [np.float64, np.float64]
    assert _Float64Actions.received[-1].tolist() == [0.25, 0.25, 0.25]


def test_normalize_observations_is_gymnasiums_wrapper_after_the_masking():
    with pytest.warns(UserWarning, match="MLPEncoder.normalize_observations = True keeps "
                                         "one set in the networks"):
        env = load("CartPole-v1", 1, seed=3, masked_observation_indices=[1, 3],
                   normalize_observations=True)
    ref = gym.wrappers.NormalizeObservation(gym.wrappers.TransformObservation(
        gym.make("CartPole-v1"), lambda o: o[[0, 2]],
        gym.spaces.Box(-np.inf, np.inf, (2,), np.float32)))
    expected, _ = ref.reset(seed=3)
    got = env.reset().observation[0]
    assert np.allclose(got.numpy(), expected, atol=1e-6)
    for _ in range(20):
        expected, _, terminated, truncated, _ = ref.step(1)
        got = env.step(torch.tensor([1])).observation[0]
        assert np.allclose(got.numpy(), expected, atol=1e-5)
        if terminated or truncated:
            break
    assert not np.allclose(expected, ref.unwrapped.state[[0, 2]])  # it did normalise
    env.close()
    with pytest.raises(UserError, match="normalize_observations wraps each copy"):
        load("CartPole-v1", 1, normalize_observations=True,
             vectorization_mode="vector_entry_point")


def test_masked_observation_indices_remove_cartpoles_velocities():
    full = load("CartPole-v1", 2, seed=3)
    masked = load("CartPole-v1", 2, seed=3, masked_observation_indices=[1, 3])
    assert masked.observation_spec().shape == (2,)
    a, b = full.reset(), masked.reset()
    assert torch.equal(b.observation, a.observation[:, [0, 2]])
    action = torch.tensor([1, 0])
    for _ in range(5):
        a, b = full.step(action), masked.step(action)
        assert torch.equal(b.observation, a.observation[:, [0, 2]])
    # The masked copies can be captured (an exact resume steps on the same episodes).
    state = masked.get_state()
    assert state is not None
    after = masked.step(action).observation
    masked.set_state(state)
    assert torch.equal(masked.step(action).observation, after)
    full.close()
    masked.close()
    for bad in ([1, 1], [4], [0, 1, 2, 3], [-1], [1, -1]):  # [-1] is no entry, not the last
        with pytest.raises(UserError, match=r"masked_observation_indices = .*CartPole-v1's "
                                            r"observation has 4 entries; give distinct "
                                            r"indices in \[0, 4\)"):
            load("CartPole-v1", 1, masked_observation_indices=bad)
