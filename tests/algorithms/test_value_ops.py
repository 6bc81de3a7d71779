"""value_ops against hand-computed cases at terminations, truncations and cuts, and against a
direct float64 transcription of the n-step and lambda-return definitions (sums, not the
recursions the module uses)."""

import random

import pytest
import torch

from rlf.algorithms import value_ops
from rlf.data_structures import StepType, starts_transition

F, M, L = StepType.FIRST, StepType.MID, StepType.LAST


def _seq(step_types, rewards, values, d, gamma=0.5):
    col = lambda x, dtype=torch.float64: torch.tensor(x, dtype=dtype)[:, None]  # noqa: E731
    return (col(rewards), col(values), col(step_types, torch.int32), gamma * col(d))


TERMINATED = _seq([F, M, L, F, M], [0, 1, 2, 0, 4], [10, 20, 30, 40, 50], [1, 1, 0, 1, 1])
TRUNCATED = _seq([F, M, L, F, M], [0, 1, 2, 0, 4], [10, 20, 30, 40, 50], [1, 1, 1, 1, 1])
CUT = _seq([F, M, M, F, M], [0, 1, 2, 0, 4], [10, 20, 30, 40, 50], [1, 1, 1, 1, 1])


def _col(x):
    return x[:, 0].tolist()


def test_discounted_return_by_hand():
    # terminated at step 2: no bootstrap there; step 3's chain ends at the sequence's end
    assert _col(value_ops.discounted_return(*TERMINATED)) == [2.0, 2.0, 30.0, 29.0]
    # truncated at step 2, or cut there: bootstrap from V_2 = 30
    assert _col(value_ops.discounted_return(*TRUNCATED)) == [9.5, 17.0, 30.0, 29.0]
    assert _col(value_ops.discounted_return(*CUT)) == [9.5, 17.0, 30.0, 29.0]


def test_gae_and_td_lambda_by_hand():
    # lambda 0.5: delta_0 = 1 + 0.5 * 20 - 10 = 1, delta_1 = 2 + 0 - 20 = -18,
    # A_1 = -18, A_0 = 1 + 0.5 * 0.5 * (-18) = -3.5; step 2 starts nothing; A_3 = 4 + 25 - 40
    adv = value_ops.generalized_advantage_estimation(*TERMINATED, td_lambda=0.5)
    assert _col(adv) == [-3.5, -18.0, 0.0, -11.0]
    ret = value_ops.td_lambda_return(*TERMINATED, td_lambda=0.5)
    assert _col(ret) == [6.5, 2.0, 30.0, 29.0]
    # lambda 1: advantages are discounted returns minus values
    adv1 = value_ops.generalized_advantage_estimation(*TRUNCATED, td_lambda=1.0)
    assert _col(adv1) == [-0.5, -3.0, 0.0, -11.0]


def test_n_step_by_hand():
    assert _col(value_ops.n_step_return(*TERMINATED, n=1)) == [11.0, 2.0, 30.0, 29.0]
    assert _col(value_ops.n_step_return(*TERMINATED, n=2)) == [2.0, 2.0, 30.0, 29.0]
    # truncated: 1 + 0.5 * 2 + 0.25 * V_2 = 9.5 with n = 2 (the chain ends at step 2)
    assert _col(value_ops.n_step_return(*TRUNCATED, n=2)) == [9.5, 17.0, 30.0, 29.0]
    assert _col(value_ops.n_step_return(*CUT, n=5)) == [9.5, 17.0, 30.0, 29.0]


def _per_step(v, st, value_of):
    """``[value_of(t, starts)]`` for every step but the last, ``V_t`` where ``t`` starts no
    transition; ``starts`` has a trailing False for the last step."""
    starts = [bool(x) for x in starts_transition(st)] + [False]
    return [value_of(t, starts) if starts[t] else v[t] for t in range(len(v) - 1)]


def _direct_n_step(r, v, st, g, n):
    """Eq. 7.1 as a sum, in Python floats: the chain from t stops at a step that starts no
    transition, at the horizon t + n, or at the sequence's last step."""
    def value_of(t, starts):
        total, scale, s = 0.0, 1.0, t
        while True:
            s += 1
            total += scale * r[s]
            scale *= g[s]
            if s == len(r) - 1 or s == t + n or not starts[s]:
                return total + scale * v[s]
    return _per_step(v, st, value_of)


def _direct_lambda(r, v, st, g, lam):
    """The lambda-return as the weighted sum of n-step returns (Sutton and Barto eq. 12.3,
    truncated at the chain's end): (1 - lam) sum_n lam^(n-1) G^(n) + lam^(N-1) G^(N)."""
    def value_of(t, starts):
        N = 1  # steps until the chain ends
        while t + N < len(r) - 1 and starts[t + N]:
            N += 1
        g_n = [_direct_n_step(r, v, st, g, n)[t] for n in range(1, N + 1)]
        return ((1 - lam) * sum(lam ** (n - 1) * g_n[n - 1] for n in range(1, N))
                + lam ** (N - 1) * g_n[N - 1])
    return _per_step(v, st, value_of)


@pytest.mark.parametrize("seed", range(5))
def test_against_the_direct_definitions_in_float64(seed):
    rng = random.Random(seed)
    T, B = 12, 3
    st = torch.full((T, B), int(M), dtype=torch.int32)
    d = torch.ones(T, B, dtype=torch.float64)
    for b in range(B):
        st[0, b] = F
        for t in range(1, T):
            u = rng.random()
            if st[t - 1, b] == L or u < 0.1:  # after a LAST, or a cut: a new episode
                st[t, b] = F
            elif u < 0.3:
                st[t, b] = L
                d[t, b] = float(rng.random() < 0.5)  # terminated or truncated
    r = torch.tensor([[rng.uniform(-2, 2) for _ in range(B)] for _ in range(T)],
                     dtype=torch.float64) * (st != F)
    v = torch.tensor([[rng.uniform(-5, 5) for _ in range(B)] for _ in range(T)],
                     dtype=torch.float64)
    g = 0.9 * d
    for b in range(B):
        args = (r[:, b].tolist(), v[:, b].tolist(), st[:, b], g[:, b].tolist())
        for n in (1, 3, 20):
            got = value_ops.n_step_return(r, v, st, g, n)[:, b].tolist()
            assert got == pytest.approx(_direct_n_step(*args, n), abs=1e-12)
        for lam in (0.0, 0.7, 1.0):
            expected = _direct_lambda(*args, lam)
            got = value_ops.td_lambda_return(r, v, st, g, td_lambda=lam)[:, b].tolist()
            assert got == pytest.approx(expected, abs=1e-12)
            adv = value_ops.generalized_advantage_estimation(r, v, st, g, td_lambda=lam)
            valid = starts_transition(st)[:, b]
            gae = [a if ok else 0.0 for a, ok in zip(
                (torch.tensor(expected, dtype=torch.float64) - v[:-1, b]).tolist(), valid.tolist())]
            assert adv[:, b].tolist() == pytest.approx(gae, abs=1e-12)


def test_bad_shapes_raise():
    r, v, st, g = TERMINATED
    with pytest.raises(ValueError, match="must share their"):
        value_ops.discounted_return(r[:3], v, st, g)
    with pytest.raises(ValueError, match="T >= 2"):
        value_ops.discounted_return(r[:1], v[:1], st[:1], g[:1])
    with pytest.raises(ValueError, match="n must be >= 1"):
        value_ops.n_step_return(r, v, st, g, 0)
