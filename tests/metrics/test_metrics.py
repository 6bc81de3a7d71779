"""Metrics against hand-computed episodes and an independent per-episode reference."""

import numpy as np
import pytest
import torch

from rlf import nest
from rlf.data_structures import StepType, TimeStep
from rlf.metrics import (AverageDiscountedReturnMetric, AverageEnvInfoMetric,
                         AverageEpisodeLengthMetric, AverageReturnMetric, AverageRewardMetric,
                         EnvironmentSteps, EpisodicStartAverageDiscountedReturnMetric,
                         NumberOfEpisodes, make_default_metrics)
from rlf.tensor_specs import TensorSpec

F, M, L = StepType.FIRST, StepType.MID, StepType.LAST


def _steps(step_types, rewards, lives=None):
    """[T, B] arrays -> list of [B] TimeSteps."""
    out = []
    for t in range(len(step_types)):
        env_info = {} if lives is None else {"lives": torch.tensor(lives[t], dtype=torch.int32)}
        out.append(TimeStep(step_type=torch.tensor(step_types[t], dtype=torch.int32),
                            reward=torch.tensor(rewards[t], dtype=torch.float32),
                            discount=torch.ones(len(step_types[t])),
                            env_id=torch.arange(len(step_types[t]), dtype=torch.int32),
                            env_info=env_info))
    return out


def test_hand_computed_single_episode():
    # F r=0, M r=1, M r=2, L r=3  -> episode of length 3, rewards r1=1, r2=2, r3=3
    steps = _steps([[F], [M], [M], [L]], [[0.], [1.], [2.], [3.]])
    g = 0.5
    ms = [NumberOfEpisodes(), EnvironmentSteps(), AverageReturnMetric(1),
          AverageEpisodeLengthMetric(1), AverageRewardMetric(1),
          AverageDiscountedReturnMetric(1, discount=g),
          EpisodicStartAverageDiscountedReturnMetric(1, discount=g)]
    for s in steps:
        for m in ms:
            m(s)
    res = [float(m.result()) for m in ms]
    # discounted return-to-go from each of the 3 states before a reward, averaged:
    # (1 + .5*2 + .25*3) + (2 + .5*3) + 3 = 2.75 + 3.5 + 3
    assert res == pytest.approx([1, 3, 6, 3, 2, (2.75 + 3.5 + 3) / 3, 2.75])


def _reference(step_types, rewards, gamma):
    """Independent per-episode computation straight from the definitions."""
    episodes = []
    for b in range(step_types.shape[1]):
        cur = None
        for t in range(step_types.shape[0]):
            if step_types[t, b] == F:
                cur = []
            elif cur is not None:
                cur.append(rewards[t, b])
                if step_types[t, b] == L:
                    episodes.append((t, b, cur))
                    cur = None
    episodes.sort(key=lambda e: (e[0], e[1]))  # the order they end in
    out = []
    for _, _, r in episodes:
        n = len(r)
        start = sum(gamma ** i * r[i] for i in range(n))
        to_go = np.mean([sum(gamma ** (k - l) * r[k] for k in range(l, n)) for l in range(n)])
        out.append((sum(r), n, sum(r) / n, to_go, start))
    return np.array(out)


@pytest.mark.parametrize("block", [1, 7])
def test_random_episodes_against_reference(block):
    rng = np.random.default_rng(0)
    t_len, batch, gamma, buffer_size = 300, 5, 0.9, 1000
    step_types = np.full((t_len, batch), M)
    step_types[0] = F
    for b in range(batch):
        t = 0
        while True:
            t += int(rng.integers(1, 12))
            if t + 1 >= t_len:
                break
            step_types[t, b], step_types[t + 1, b] = L, F
            t += 1
    rewards = rng.normal(size=(t_len, batch))
    rewards[step_types == F] = 0.0
    steps = _steps(step_types, rewards)
    ms = make_default_metrics(batch, buffer_size=buffer_size, discount=gamma)
    for i in range(0, t_len, block):
        s = nest.utils.stack_nests(steps[i:i + block]) if block > 1 else steps[i]
        for m in ms:
            m(s)
    ref = _reference(step_types, rewards, gamma)
    assert int(ms[0].result()) == len(ref)
    assert int(ms[1].result()) == int((step_types != F).sum())
    got = [float(ms[i].result()) for i in (2, 3, 6, 5, 7)]
    np.testing.assert_allclose(got, ref.mean(axis=0), rtol=1e-6)


def test_buffer_keeps_last_episodes_and_vector_reward():
    m = AverageReturnMetric(2, buffer_size=2, reward_shape=(2,))
    seq = _steps([[F, F], [L, M], [F, L], [L, F]],
                 [[[0, 0], [0, 0]], [[1, 10], [5, 50]], [[0, 0], [2, 20]], [[4, 40], [0, 0]]])
    for s in seq:
        m(s)
    # episodes end: env0 (1,10) at t1, env1 (7,70) at t2, env0 (4,40) at t3 -> last two
    r = m.result()
    assert float(r["0"]) == pytest.approx(5.5) and float(r["1"]) == pytest.approx(55)


def test_env_info_metric_and_state_dict_roundtrip():
    spec = {"lives": TensorSpec((), torch.int32)}
    m = AverageEnvInfoMetric(spec, batch_size=1)
    seq = _steps([[F], [M], [L]], [[0.], [0.], [0.]], lives=[[3], [3], [2]])
    for s in seq[:2]:
        m(s)
    m2 = AverageEnvInfoMetric(spec, batch_size=1)
    m2.load_state_dict(m.state_dict())  # the episode in progress survives a checkpoint
    m2(seq[2])
    assert float(m2.result()["lives"]) == 5.0


def test_first_steps_are_not_counted():
    s = _steps([[F, F]], [[7., 7.]])[0]
    ms = make_default_metrics(2)
    for m in ms:
        m(s)
    assert int(ms[1].result()) == 0 and int(ms[0].result()) == 0
    assert float(ms[2].result()) == 0.0  # no finished episode yet


def test_episode_score_sums_the_raw_reward_and_is_ninth():
    from rlf.metrics import AverageEpisodeScoreMetric
    ms = make_default_metrics(1, env_info_spec={"lives": TensorSpec((), torch.int32),
                                                "raw_reward": TensorSpec(())})
    assert [type(m).__name__ for m in ms][8] == "AverageEpisodeScoreMetric"
    assert len(make_default_metrics(1, env_info_spec={})) == 8  # no raw reward: eight
    m = AverageEpisodeScoreMetric(1, buffer_size=2)
    # F M M L F M L: scores 30 + 5 + 0 = 35 and 200 (the FIRST steps' values are ignored)
    steps = [(F, 0.0), (M, 30.0), (M, 5.0), (L, 0.0), (F, 99.0), (M, 200.0), (L, 0.0)]
    for st, raw in steps:
        m(TimeStep(step_type=torch.tensor([st], dtype=torch.int32), reward=torch.zeros(1),
                   discount=torch.ones(1), observation=torch.zeros(1),
                   prev_action=torch.zeros(1), env_id=torch.zeros(1, dtype=torch.int32),
                   env_info={"raw_reward": torch.tensor([raw])}))
    assert float(m.result()) == (35.0 + 200.0) / 2


def test_episode_averages_are_not_summarised_before_an_episode_ends(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from rlf.utils import summary
    writer = summary.create_summary_writer(str(tmp_path), flush_secs=1)
    summary.set_default_writer(writer)
    summary.set_summary_interval(1)
    m = make_default_metrics(1)
    try:
        for step, st in enumerate([F, M, M, L, F]):
            summary.set_global_counter(step)
            ts = TimeStep(step_type=torch.tensor([st], dtype=torch.int32),
                          reward=torch.tensor([-1.0 if st != F else 0.0]),
                          discount=torch.ones(1), observation=torch.zeros(1),
                          prev_action=torch.zeros(1), env_id=torch.zeros(1, dtype=torch.int32),
                          env_info={})
            for metric in m:
                metric(ts)
                metric.gen_summaries()
    finally:
        summary.close()
    acc = EventAccumulator(str(tmp_path), size_guidance={"scalars": 0})
    acc.Reload()
    returns = [(e.step, e.value) for e in acc.Scalars("Metrics/AverageReturn")]
    assert returns == [(3, -3.0), (4, -3.0)]  # nothing at steps 0-2, before the first LAST
    assert [e.step for e in acc.Scalars("Metrics/EnvironmentSteps")] == [0, 1, 2, 3, 4]
