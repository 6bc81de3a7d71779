"""Returns and advantages over ``[T, B]`` sequences: pure functions (ALF's ``value_ops``).

Conventions (docs/design.md, "Data conventions"): step ``t`` holds the state ``x_t``, its value
``V_t``, and the reward ``r_t`` and discount ``d_t`` of the transition *into* ``x_t``; so the
transition ``x_t -> x_{t+1}`` has reward ``r_{t+1}`` and discount ``gamma * d_{t+1}``, where
``d`` is 0 when the episode terminated at ``t+1`` and 1 otherwise (also at a truncation).
``discounts`` below are ``gamma * d`` (the caller multiplies). A *chain* of transitions ends at
a step ``s`` that starts none (``starts_transition``: a LAST, or a step before an episode cut)
and at the sequence's last step; there the value ``V_s`` bootstraps whatever follows.

Every function returns ``[T-1, B, ...]``: entry ``t`` belongs to the transition out of step
``t``. Entries of steps that start no transition are 0 (advantages) or ``V_t`` (returns), and
carry no learning signal: mask them with ``starts_transition(step_types)``. Results are
computed without gradient (targets).
"""

from __future__ import annotations

import torch

from rlf.data_structures import starts_transition

__all__ = ["discounted_return", "n_step_return", "td_lambda_return",
           "generalized_advantage_estimation", "value_rescaling", "inverse_value_rescaling"]


def _chain_inputs(rewards, values, step_types, discounts):
    if not (rewards.shape[:2] == values.shape[:2] == step_types.shape[:2]
            == discounts.shape[:2]):
        raise ValueError(f"value_ops: rewards {tuple(rewards.shape)}, values "
                         f"{tuple(values.shape)}, step_types {tuple(step_types.shape)} and "
                         f"discounts {tuple(discounts.shape)} must share their [T, B]")
    if rewards.shape[0] < 2:
        raise ValueError(f"value_ops: sequences need T >= 2 steps, got {rewards.shape[0]}")
    starts = starts_transition(step_types)
    while starts.ndim < values.ndim:  # trailing dims (vector rewards) broadcast
        starts = starts.unsqueeze(-1)
    return starts.to(values.dtype)


@torch.no_grad()
def td_lambda_return(rewards: torch.Tensor, values: torch.Tensor, step_types: torch.Tensor,
                     discounts: torch.Tensor, td_lambda: float = 0.95) -> torch.Tensor:
    r"""TD(lambda) returns (Sutton and Barto 2018, eq. 12.18, recursive form):

    $$
    G_t^\lambda = r_{t+1} + \gamma_{t+1}\,[(1-\lambda) V_{t+1} + \lambda G_{t+1}^\lambda]
    $$

    with $G_s^\lambda = V_s$ where the chain ends (module docstring).

    Args:
        rewards: ``[T, B, ...]`` float, ``r_t`` (the reward into step ``t``).
        values: ``[T, B, ...]`` float, ``V_t``.
        step_types: ``[T, B]`` int ``StepType``.
        discounts: ``[T, B, ...]`` float, ``gamma * d_t``.
        td_lambda: ``lambda`` in ``[0, 1]``: 0 gives one-step TD targets, 1 discounted returns
            bootstrapped at the chain's end.

    Returns:
        ``[T-1, B, ...]`` returns (``V_t`` at steps that start no transition).

    Raises:
        ValueError: for mismatched ``[T, B]`` or ``T < 2``.
    """
    starts = _chain_inputs(rewards, values, step_types, discounts)
    returns = torch.empty_like(values[:-1])
    following = values[-1]
    for t in reversed(range(values.shape[0] - 1)):
        target = rewards[t + 1] + discounts[t + 1] * (
            (1 - td_lambda) * values[t + 1] + td_lambda * following)
        returns[t] = starts[t] * target + (1 - starts[t]) * values[t]
        following = returns[t]
    return returns


def discounted_return(rewards: torch.Tensor, values: torch.Tensor, step_types: torch.Tensor,
                      discounts: torch.Tensor) -> torch.Tensor:
    r"""Discounted returns bootstrapped where the chain ends (``td_lambda_return`` with
    ``lambda = 1``): $G_t = r_{t+1} + \gamma_{t+1} G_{t+1}$, $G_s = V_s$ at the end.

    Args, Returns, Raises: see ``td_lambda_return``.
    """
    return td_lambda_return(rewards, values, step_types, discounts, td_lambda=1.0)


@torch.no_grad()
def generalized_advantage_estimation(rewards: torch.Tensor, values: torch.Tensor,
                                     step_types: torch.Tensor, discounts: torch.Tensor,
                                     td_lambda: float = 0.95) -> torch.Tensor:
    r"""GAE (Schulman et al. 2016, eq. 16), recursively:

    $$
    A_t = \delta_t + \gamma_{t+1}\lambda A_{t+1},\quad
    \delta_t = r_{t+1} + \gamma_{t+1} V_{t+1} - V_t
    $$

    with $A_s = 0$ where the chain ends; equal to ``td_lambda_return - V``.

    Args, Raises: see ``td_lambda_return``.

    Returns:
        ``[T-1, B, ...]`` advantages (0 at steps that start no transition).
    """
    starts = _chain_inputs(rewards, values, step_types, discounts)
    delta = rewards[1:] + discounts[1:] * values[1:] - values[:-1]
    advantages = torch.empty_like(delta)
    following = torch.zeros_like(values[-1])
    for t in reversed(range(delta.shape[0])):
        advantages[t] = starts[t] * (delta[t] + discounts[t + 1] * td_lambda * following)
        following = advantages[t]
    return advantages


@torch.no_grad()
def n_step_return(rewards: torch.Tensor, values: torch.Tensor, step_types: torch.Tensor,
                  discounts: torch.Tensor, n: int) -> torch.Tensor:
    r"""n-step returns (Sutton and Barto 2018, eq. 7.1):

    $$
    G_t^{(n)} = \sum_{k=0}^{m-1} \Big(\prod_{j=1}^{k}\gamma_{t+j}\Big) r_{t+k+1}
    + \Big(\prod_{j=1}^{m}\gamma_{t+j}\Big) V_{t+m}
    $$

    where ``m <= n`` stops early where the chain ends (at ``t+m``) or at the sequence's last
    step. A terminated episode's discount 0 removes the bootstrap.

    Args:
        rewards, values, step_types, discounts: see ``td_lambda_return``.
        n: steps before bootstrapping (>= 1; 1 gives one-step TD targets).

    Returns:
        ``[T-1, B, ...]`` returns (``V_t`` at steps that start no transition).

    Raises:
        ValueError: for ``n < 1``, mismatched ``[T, B]`` or ``T < 2``.
    """
    if n < 1:
        raise ValueError(f"n_step_return: n must be >= 1, got {n}")
    starts = _chain_inputs(rewards, values, step_types, discounts)
    last = values.shape[0] - 1
    returns = torch.empty_like(values[:-1])
    for t in range(last):
        horizon = min(t + n, last)
        total = torch.zeros_like(values[t])  # discounted rewards so far
        scale = torch.ones_like(values[t])  # the discount of the next term
        going = starts[t]  # 1 where the chain from t still goes on
        result = (1 - starts[t]) * values[t]
        for s in range(t + 1, horizon + 1):
            total = total + going * scale * rewards[s]
            scale = scale * discounts[s]
            stop = going if s == horizon else going * (1 - starts[s])
            result = result + stop * (total + scale * values[s])
            going = going - stop
        returns[t] = result
    return returns


def value_rescaling(x: torch.Tensor, epsilon: float = 1e-3) -> torch.Tensor:
    r"""The invertible value rescaling of Pohlen et al. 2018 ("Observe and Look Further",
    section 3.2), used by R2D2 (Kapturowski et al. 2019) in place of reward clipping:

    $$ h(x) = \mathrm{sign}(x) (\sqrt{|x| + 1} - 1) + \epsilon x $$

    Args:
        x: ``[...]`` values (returns), any float dtype.
        epsilon: ``epsilon > 0``, which keeps ``h^{-1}`` Lipschitz (the papers' 1e-3).

    Returns:
        ``[...]`` ``h(x)``, same dtype.
    """
    return torch.sign(x) * (torch.sqrt(x.abs() + 1.0) - 1.0) + epsilon * x


def inverse_value_rescaling(x: torch.Tensor, epsilon: float = 1e-3) -> torch.Tensor:
    r"""The inverse of ``value_rescaling`` (Pohlen et al. 2018, proposition A.2):

    $$ h^{-1}(x) = \mathrm{sign}(x) \left( \left( \frac{\sqrt{1 + 4 \epsilon
       (|x| + 1 + \epsilon)} - 1}{2 \epsilon} \right)^2 - 1 \right) $$

    Args:
        x: ``[...]`` rescaled values, any float dtype.
        epsilon: the ``epsilon > 0`` of ``value_rescaling``.

    Returns:
        ``[...]`` ``h^{-1}(x)``, same dtype.
    """
    # (sqrt(1 + u) - 1) / (2 eps) written as 2 (|x| + 1 + eps) / (sqrt(1 + u) + 1): the same
    # value without the cancellation that costs float32 ~1e-5 relative error at small |x|.
    u = x.abs() + 1.0 + epsilon
    root = 2.0 * u / (torch.sqrt(1.0 + 4.0 * epsilon * u) + 1.0)
    return torch.sign(x) * (root ** 2 - 1.0)
