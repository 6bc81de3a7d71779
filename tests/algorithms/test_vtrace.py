"""V-trace against a direct NumPy float64 transcription of Espeholt et al. 2018, eq. (1)."""

import numpy as np
import pytest
import torch

from rlf.algorithms import vtrace


def _reference(log_rhos, discounts, rewards, values, bootstrap, rho_bar, c_bar, pg_bar, lam):
    """eq. (1) as a sum over t (not the recursion), and the §4.2 advantage, in float64."""
    rhos = np.exp(log_rhos)
    extra = (1,) * (rewards.ndim - 2)
    rhos = rhos.reshape(rhos.shape + extra)

    def clip(x, b):
        return x if b is None else np.minimum(x, b)

    rho, c = clip(rhos, rho_bar), lam * clip(rhos, c_bar)
    t_len = rewards.shape[0]
    v_next = np.concatenate([values[1:], bootstrap[None]])
    delta = rho * (rewards + discounts * v_next - values)
    vs = np.zeros_like(values)
    for s in range(t_len):
        total = values[s].copy()
        for t in range(s, t_len):
            prod = np.ones_like(values[s])
            for i in range(s, t):
                prod = prod * discounts[i] * c[i]
            total = total + prod * delta[t]
        vs[s] = total
    vs_next = np.concatenate([vs[1:], bootstrap[None]])
    pg = clip(rhos, pg_bar) * (rewards + discounts * vs_next - values)
    return vs, pg


def _inputs(rng, t_len, batch, extra=()):
    log_rhos = rng.normal(0.0, 1.0, size=(t_len, batch))  # many rhos > 1: clipping matters
    shape = (t_len, batch) + extra
    discounts = 0.9 * (rng.random(shape) > 0.15)  # some terminations
    rewards = rng.normal(size=shape)
    values = rng.normal(size=shape)
    bootstrap = rng.normal(size=(batch,) + extra)
    return log_rhos, discounts, rewards, values, bootstrap


@pytest.mark.parametrize("t_len,batch,extra", [(1, 1, ()), (5, 3, ()), (20, 4, ()),
                                                (7, 2, (3,))])
@pytest.mark.parametrize("clips,lam", [((1.0, 1.0, 1.0), 1.0), ((2.0, 0.5, 1.5), 0.9),
                                       ((None, None, None), 0.95), ((0.7, 1.0, None), 1.0)])
def test_matches_numpy_transcription_of_eq1(t_len, batch, extra, clips, lam):
    rng = np.random.default_rng(t_len * 100 + batch)
    inputs = _inputs(rng, t_len, batch, extra)
    ref_vs, ref_pg = _reference(*inputs, *clips, lam)
    out = vtrace.from_importance_weights(*[torch.tensor(x) for x in inputs], *clips,
                                         lambda_=lam)
    np.testing.assert_allclose(out.vs.numpy(), ref_vs, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(out.pg_advantages.numpy(), ref_pg, rtol=1e-10, atol=1e-10)
    if clips[0] is not None and t_len * batch >= 5:
        assert (np.exp(inputs[0]) > clips[0]).any()  # the clip was exercised


def test_on_policy_is_n_step_bootstrapped_return():
    rng = np.random.default_rng(1)
    t_len, batch, gamma = 6, 3, 0.9
    _, _, rewards, values, bootstrap = _inputs(rng, t_len, batch)
    discounts = np.full((t_len, batch), gamma)
    discounts[2, 1] = 0.0  # termination after step 2 of env 1
    out = vtrace.from_importance_weights(
        torch.zeros(t_len, batch, dtype=torch.float64), torch.tensor(discounts),
        torch.tensor(rewards), torch.tensor(values), torch.tensor(bootstrap),
        None, None, None, 1.0)
    for b in range(batch):
        for s in range(t_len):
            g, ret = 1.0, 0.0
            for t in range(s, t_len):
                ret += g * rewards[t, b]
                g *= discounts[t, b]
            ret += g * bootstrap[b]
            assert out.vs[s, b].item() == pytest.approx(ret, rel=1e-12)
    # hand case: V=7, reward 1, discount .5, V(x_1)=2: vs = 7 + (1 + .5*2 - 7) = 2 and
    # pg_advantage = 1 + .5*2 - 7 = -5
    one = vtrace.from_importance_weights(torch.zeros(1, 1), torch.tensor([[0.5]]),
                                         torch.tensor([[1.0]]), torch.tensor([[7.0]]),
                                         torch.tensor([2.0]))
    assert one.vs.item() == pytest.approx(2.0) and one.pg_advantages.item() == pytest.approx(-5)


@pytest.mark.parametrize("multi", [False, True])
def test_from_logits_equals_from_importance_weights_and_gradients(multi):
    torch.manual_seed(0)
    t_len, batch = 5, 3
    sizes = [4, 2] if multi else [4]
    behaviour = [torch.randn(t_len, batch, n, requires_grad=True) for n in sizes]
    target = [torch.randn(t_len, batch, n, requires_grad=True) for n in sizes]
    actions = torch.stack([torch.randint(n, (t_len, batch)) for n in sizes], -1)
    values = torch.randn(t_len, batch, requires_grad=True)
    bootstrap = torch.randn(batch, requires_grad=True)
    discounts, rewards = torch.full((t_len, batch), 0.9), torch.randn(t_len, batch)
    b_logits = behaviour if multi else behaviour[0]
    t_logits = target if multi else target[0]
    acts = actions if multi else actions[..., 0]
    out = vtrace.from_logits(b_logits, t_logits, acts, discounts, rewards, values, bootstrap)

    def logp(logits):
        return sum(torch.log_softmax(lg, -1).gather(-1, actions[..., i:i + 1]).squeeze(-1)
                   for i, lg in enumerate(logits))
    log_rhos = (logp(target) - logp(behaviour)).detach()
    ref = vtrace.from_importance_weights(log_rhos, discounts, rewards, values.detach(),
                                         bootstrap.detach())
    torch.testing.assert_close(out.log_rhos, log_rhos)
    torch.testing.assert_close(out.vs, ref.vs)
    torch.testing.assert_close(out.pg_advantages, ref.pg_advantages)
    assert not out.vs.requires_grad and not out.pg_advantages.requires_grad
    assert not out.behaviour_action_log_probs.requires_grad
    out.target_action_log_probs.sum().backward()
    assert all(t.grad is not None and t.grad.abs().sum() > 0 for t in target)
    assert all(b.grad is None for b in behaviour) and values.grad is None


def test_normal_log_probs_and_shape_errors():
    loc, scale, a = torch.zeros(2, 3, 2), torch.ones(2, 3, 2), torch.zeros(2, 3, 2)
    lp = vtrace.normal_log_probs(loc, scale, a)
    torch.testing.assert_close(lp, torch.full((2, 3), -np.log(2 * np.pi)))
    with pytest.raises(ValueError, match="bootstrap_value"):
        vtrace.from_importance_weights(torch.zeros(2, 3), torch.ones(2, 3), torch.ones(2, 3),
                                       torch.ones(2, 3), torch.ones(2))


def test_log_rhos_with_trailing_dims_broadcast_against_values():
    torch.manual_seed(0)
    T, B = 5, 3
    log_rhos = torch.randn(T, B)
    discounts, rewards = torch.rand(T, B) * 0.9, torch.randn(T, B)
    values, bootstrap = torch.randn(T, B), torch.randn(B)
    flat = vtrace.from_importance_weights(log_rhos, discounts, rewards, values, bootstrap)
    kept = vtrace.from_importance_weights(log_rhos[..., None], discounts[..., None],
                                          rewards[..., None], values[..., None],
                                          bootstrap[..., None])
    torch.testing.assert_close(kept.vs[..., 0], flat.vs)
    torch.testing.assert_close(kept.pg_advantages[..., 0], flat.pg_advantages)
    wide = vtrace.from_importance_weights(  # [T, B, 1] rhos over a 3-dim reward
        log_rhos[..., None], discounts[..., None].expand(T, B, 3),
        rewards[..., None].expand(T, B, 3), values[..., None].expand(T, B, 3),
        bootstrap[..., None].expand(B, 3))
    for k in range(3):
        torch.testing.assert_close(wide.vs[..., k], flat.vs)
    with pytest.raises(ValueError, match="broadcast"):
        vtrace.from_importance_weights(torch.randn(T, B, 2), *(
            x[..., None].expand(*x.shape, 3) for x in (discounts, rewards, values, bootstrap)))
