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
        to_go = np.mean([sum(gamma ** (k - j) * r[k] for k in range(j, n)) for j in range(n)])
        out.append((sum(r), n, sum(r) / n, to_go, start))
    return np.array(out)


@pytest.mark.parametrize("block", [1, 7, 50])
@pytest.mark.parametrize("buffer_size", [1000, 4])
@pytest.mark.parametrize("cuts", [False, True])
def test_random_episodes_against_reference(block, buffer_size, cuts):
    # buffer_size 4: blocks of 7 or 50 steps end more than 4 episodes at once; after every
    # block the averages are over the last 4 episodes to end. cuts: some episodes are cut
    # (a FIRST after a MID: an environment restarted by a resume or an actor restart); the
    # cut part counts as steps but is no episode, and its rewards join none.
    rng = np.random.default_rng(0)
    t_len, batch, gamma = 300, 5, 0.9
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
    if cuts:
        mid = np.argwhere((step_types[1:-1] == M) & (step_types[:-2] == M)
                          & (step_types[2:] == M)) + [1, 0]
        for t, b in mid[rng.choice(len(mid), 12, replace=False)]:
            step_types[t, b] = F
        assert ((step_types[1:] == F) & (step_types[:-1] == M)).sum() == 12
    rewards = rng.normal(size=(t_len, batch))
    rewards[step_types == F] = 0.0
    steps = _steps(step_types, rewards)
    ms = make_default_metrics(batch, buffer_size=buffer_size, discount=gamma)
    for i in range(0, t_len, block):
        s = nest.utils.stack_nests(steps[i:i + block]) if block > 1 else steps[i]
        for m in ms:
            m(s)
        end = i + block
        ref = _reference(step_types[:end], rewards[:end], gamma)
        assert int(ms[0].result()) == len(ref)
        assert int(ms[1].result()) == int((step_types[:end] != F).sum())
        if len(ref):
            got = [float(ms[k].result()) for k in (2, 3, 6, 5, 7)]
            np.testing.assert_allclose(got, ref[-buffer_size:].mean(axis=0), rtol=1e-5,
                                       atol=1e-6)


def test_a_block_ending_more_episodes_than_the_buffer_holds():
    # One unroll ends returns 1, 2, 3, 4 (the buffer of 3 keeps 2, 3, 4); the next ends 5:
    # the last three are 3, 4, 5.
    m = AverageReturnMetric(1, buffer_size=3)
    for returns in ([1., 2., 3., 4.], [5.]):
        rewards = [row for r in returns for row in ([0.], [r], [0.])]
        m(nest.utils.stack_nests(_steps([[F], [M], [L]] * len(returns), rewards)))
    assert float(m.result()) == pytest.approx(4.0)


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


def test_new_episodes_are_summarised_once_each_by_hand(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from rlf.utils import summary
    # B = 2; summaries after t = 3, 4, 6 and 8.
    # env 0 ends an episode at t2 (1 + 2 = 3) and t5 (5 + 5 = 10); env 1 at t3 (3 + 3 + 3 = 9)
    # and t7 (2 + 2 + 2 = 6).
    types = [[F, F], [M, M], [L, M], [F, L], [M, F], [L, M], [F, M], [M, L], [M, F]]
    rewards = [[0, 0], [1, 3], [2, 3], [0, 3], [5, 0], [5, 2], [0, 2], [1, 2], [1, 0]]
    steps = _steps(types, [[float(r) for r in row] for row in rewards])
    # buffer_size 1: the 100-episode-style average would see only the latest episode
    m = AverageReturnMetric(2, buffer_size=1, new_episodes=True)
    env_steps = EnvironmentSteps()
    writer = summary.create_summary_writer(str(tmp_path), flush_secs=1)
    summary.set_default_writer(writer)
    summary.set_summary_interval(1)
    try:
        for t, s in enumerate(steps):
            m(s)
            env_steps(s)
            if t in (3, 4, 6, 8):
                summary.set_global_counter(t)
                m.gen_summaries(step_metrics=[env_steps])
            if t == 5:  # a checkpoint between summaries keeps the episodes counted so far
                restored = AverageReturnMetric(2, buffer_size=1, new_episodes=True)
                restored.load_state_dict(m.state_dict())
                assert float(restored._new_sum[0]) == 10.0 and int(restored._new_count) == 1
    finally:
        summary.close()
    acc = EventAccumulator(str(tmp_path), size_guidance={"scalars": 0})
    acc.Reload()

    def points(tag):
        return [(e.step, e.value) for e in acc.Scalars(tag)]
    # nothing at t = 4: no episode ended since the summary at t = 3
    assert points("Metrics_new_episodes/AverageReturn") == [(3, 6.0), (6, 10.0), (8, 6.0)]
    assert points("Metrics_new_episodes/NumberOfEpisodes") == [(3, 2.0), (6, 1.0), (8, 1.0)]
    # against environment steps (the non-FIRST steps of both environments: 5 by t = 3, 9 by
    # t = 6, 12 by t = 8)
    assert [s for s, _ in points("Metrics_new_episodes_vs_EnvironmentSteps/AverageReturn")] \
        == [5, 9, 12]
    assert points("Metrics/AverageReturn") == [(3, 9.0), (4, 9.0), (6, 10.0), (8, 6.0)]


def test_new_episodes_cover_every_episode_against_the_reference():
    rng = np.random.default_rng(3)
    types = rng.choice([F, M, M, M, L], size=(400, 3)).astype(np.int32)
    types[0] = F
    types[1:][types[:-1] == L] = F  # a LAST is followed by a FIRST
    rewards = rng.normal(size=(400, 3)).round(2)
    m = AverageReturnMetric(3, buffer_size=2, new_episodes=True)
    total, count = 0.0, 0
    for block in np.array_split(np.arange(400), 7):  # summaries between unrolls of any length
        m(TimeStep(step_type=torch.tensor(types[block]), reward=torch.tensor(rewards[block]),
                   discount=torch.ones(len(block), 3), env_id=torch.arange(3).repeat(
                       len(block), 1), env_info={}))
        total += float(m._new_sum[0])
        count += int(m._new_count)
        m._new_sum.zero_()
        m._new_count.zero_()
    # each finished episode, once: sum of its rewards after its FIRST, up to its LAST
    ref = [sum(rewards[f + 1:t + 1, b]) for b in range(3) for t in np.nonzero(types[:, b] == L)[0]
           for f in [max(np.nonzero(types[:t, b] == F)[0])]]
    assert count == len(ref) > 20
    assert total == pytest.approx(sum(ref))
