"""V-trace off-policy actor-critic targets (Espeholt et al. 2018, "IMPALA", §4.1).

Pure functions of tensors; this module imports only torch and math. Conventions (as DeepMind's
``scalable_agent`` and RLlib): index ``t`` of ``rewards`` and ``discounts`` belongs to the
transition ``x_t -> x_{t+1}``; ``discounts[t] = gamma * (1 - terminated_{t+1})``, so a
terminated episode does not bootstrap. ``bootstrap_value`` is ``V(x_T)``, the value of the
state after the last one.

For ``s = 0 .. T-1`` (eq. 1, written recursively as in the paper's Remark 1):

    rho_t = min(rho_bar, pi(a_t|x_t) / mu(a_t|x_t))
    c_t   = lambda * min(c_bar, pi(a_t|x_t) / mu(a_t|x_t))
    delta_t V = rho_t * (r_t + gamma_t * V(x_{t+1}) - V(x_t))
    v_s = V(x_s) + delta_s V + gamma_s * c_s * (v_{s+1} - V(x_{s+1})),   v_T = V(x_T)

and the policy-gradient advantage (§4.2):

    A_s = min(rho_bar_pg, pi/mu) * (r_s + gamma_s * v_{s+1} - V(x_s))
"""

from __future__ import annotations

import math

from typing import List, NamedTuple, Optional, Sequence, Union, cast

import torch

__all__ = ["VTraceReturns", "VTraceFromLogitsReturns", "from_importance_weights",
           "from_logits", "categorical_log_probs", "normal_log_probs"]


class VTraceReturns(NamedTuple):
    """``vs``: ``[T, B, ...]`` V-trace value targets; ``pg_advantages``: ``[T, B, ...]``.
    Both are detached."""

    vs: torch.Tensor
    pg_advantages: torch.Tensor


class VTraceFromLogitsReturns(NamedTuple):
    """``from_logits`` results. ``vs``, ``pg_advantages``, ``log_rhos`` and
    ``behaviour_action_log_probs`` are detached; ``target_action_log_probs`` ``[T, B]`` keeps
    its gradient with respect to the target logits (for the policy-gradient loss)."""

    vs: torch.Tensor
    pg_advantages: torch.Tensor
    log_rhos: torch.Tensor
    behaviour_action_log_probs: torch.Tensor
    target_action_log_probs: torch.Tensor


def _clip(x: torch.Tensor, threshold: Optional[float]) -> torch.Tensor:
    return x if threshold is None else torch.clamp(x, max=threshold)


@torch.no_grad()
def from_importance_weights(log_rhos: torch.Tensor,
                            discounts: torch.Tensor,
                            rewards: torch.Tensor,
                            values: torch.Tensor,
                            bootstrap_value: torch.Tensor,
                            clip_rho_threshold: Optional[float] = 1.0,
                            clip_c_threshold: Optional[float] = 1.0,
                            clip_pg_rho_threshold: Optional[float] = 1.0,
                            lambda_: float = 1.0) -> VTraceReturns:
    """V-trace targets from log importance weights (Espeholt et al. 2018, eq. 1).

    Args:
        log_rhos: ``[T, B]`` float, ``log pi(a_t|x_t) - log mu(a_t|x_t)`` (target minus
            behaviour policy); ``[T, B, ...]`` with trailing dims that broadcast against
            ``values`` (e.g. ``[T, B, 1]``, as scalable_agent's tests pass them) is accepted too.
        discounts: ``[T, B, ...]`` float, ``gamma * (1 - terminated)`` of transition ``t``.
        rewards: ``[T, B, ...]`` float, reward of transition ``t``. Trailing dims (vector
            rewards) are allowed; ``log_rhos`` broadcasts over them.
        values: ``[T, B, ...]`` float, ``V(x_t)``.
        bootstrap_value: ``[B, ...]`` float, ``V(x_T)``.
        clip_rho_threshold: ``rho_bar``; None for no clipping.
        clip_c_threshold: ``c_bar``; None for no clipping.
        clip_pg_rho_threshold: the clip of the rho in the policy-gradient advantage; None for
            no clipping.
        lambda_: the trace coefficient ``lambda`` of §4.2 (``c_t = lambda * min(c_bar, .)``).

    Returns:
        ``VTraceReturns(vs, pg_advantages)``, each shaped like ``values``, detached.

    Raises:
        ValueError: if the shapes do not fit together.
    """
    if values.shape != rewards.shape or discounts.shape != rewards.shape:
        raise ValueError(f"vtrace: rewards {tuple(rewards.shape)}, discounts "
                         f"{tuple(discounts.shape)} and values {tuple(values.shape)} must have "
                         f"one shape [T, B, ...]")
    extra = values.ndim - log_rhos.ndim
    rho_shape = tuple(log_rhos.shape) + (1,) * max(extra, 0)
    fits = (extra >= 0 and log_rhos.shape[:2] == values.shape[:2]
            and all(a in (1, b) for a, b in zip(rho_shape, values.shape)))
    if bootstrap_value.shape != values.shape[1:] or not fits:
        raise ValueError(f"vtrace: bootstrap_value {tuple(bootstrap_value.shape)} must be "
                         f"{tuple(values.shape[1:])} and log_rhos {tuple(log_rhos.shape)} must be "
                         f"[T, B] = {tuple(values.shape[:2])}, with trailing dims that "
                         f"broadcast against values' {tuple(values.shape[2:])}")
    rhos = torch.exp(log_rhos).reshape(rho_shape)
    clipped_rhos = _clip(rhos, clip_rho_threshold)
    cs = lambda_ * _clip(rhos, clip_c_threshold)
    values_t_plus_1 = torch.cat([values[1:], bootstrap_value[None]], dim=0)
    deltas = clipped_rhos * (rewards + discounts * values_t_plus_1 - values)

    # v_s - V(x_s) = delta_s + gamma_s c_s (v_{s+1} - V(x_{s+1})), backwards from v_T = V(x_T)
    vs_minus_v = torch.zeros_like(values)
    acc = torch.zeros_like(bootstrap_value)
    for t in reversed(range(values.shape[0])):
        acc = deltas[t] + discounts[t] * cs[t] * acc
        vs_minus_v[t] = acc
    vs = vs_minus_v + values

    vs_t_plus_1 = torch.cat([vs[1:], bootstrap_value[None]], dim=0)
    pg_advantages = _clip(rhos, clip_pg_rho_threshold) * (
        rewards + discounts * vs_t_plus_1 - values)
    return VTraceReturns(vs=vs, pg_advantages=pg_advantages)


Logits = Union[torch.Tensor, Sequence[torch.Tensor]]


def categorical_log_probs(logits: Logits, actions: Union[torch.Tensor, Sequence[torch.Tensor]]
                          ) -> torch.Tensor:
    """``log pi(a|x)`` of categorical or multi-categorical actions.

    Args:
        logits: ``[T, B, N]``, or a list of ``[T, B, N_i]`` (one per sub-action of a
            MultiDiscrete space).
        actions: ``[T, B]`` int; for a list of logits ``[T, B, K]`` int or a list of ``[T, B]``.

    Returns:
        ``[T, B]``: the log-probability, summed over sub-actions.
    """
    if isinstance(logits, torch.Tensor):
        assert isinstance(actions, torch.Tensor)
        return torch.log_softmax(logits, dim=-1).gather(
            -1, actions.long().unsqueeze(-1)).squeeze(-1)
    if isinstance(actions, torch.Tensor):
        actions = actions.unbind(-1)
    if len(actions) != len(logits):
        raise ValueError(f"categorical_log_probs: {len(logits)} logits for {len(actions)} "
                         f"sub-actions")
    return cast(torch.Tensor, sum(categorical_log_probs(lg, a) for lg, a in zip(logits, actions)))


def normal_log_probs(loc: torch.Tensor, scale: torch.Tensor, actions: torch.Tensor,
                     event_dims: int = 1) -> torch.Tensor:
    """``log pi(a|x)`` of a diagonal Normal policy, summed over the last ``event_dims`` dims.

    Args:
        loc, scale: ``[T, B, d]`` mean and standard deviation (> 0).
        actions: ``[T, B, d]``.

    Returns:
        ``[T, B]`` log-densities (use their difference as ``log_rhos``).
    """
    # N(loc, scale)'s log-density, written out: torch.distributions would validate its
    # arguments on the host (a device synchronisation)
    lp = -0.5 * ((actions - loc) / scale) ** 2 - torch.log(scale) - 0.5 * math.log(2 * math.pi)
    return lp.sum(dim=tuple(range(-event_dims, 0))) if event_dims else lp


def from_logits(behaviour_policy_logits: Logits,
                target_policy_logits: Logits,
                actions: Union[torch.Tensor, List[torch.Tensor]],
                discounts: torch.Tensor,
                rewards: torch.Tensor,
                values: torch.Tensor,
                bootstrap_value: torch.Tensor,
                clip_rho_threshold: Optional[float] = 1.0,
                clip_c_threshold: Optional[float] = 1.0,
                clip_pg_rho_threshold: Optional[float] = 1.0,
                lambda_: float = 1.0) -> VTraceFromLogitsReturns:
    """V-trace for categorical (or multi-categorical) policies given their logits.

    ``log_rhos = log pi(a_t|x_t) - log mu(a_t|x_t)`` from the two policies' logits, then
    ``from_importance_weights``.

    Args:
        behaviour_policy_logits: ``mu``'s logits ``[T, B, N]`` or a list of ``[T, B, N_i]``.
        target_policy_logits: ``pi``'s logits, same structure; gradients flow into
            ``target_action_log_probs`` only.
        actions: ``[T, B]`` int (or ``[T, B, K]`` / a list for multi-categorical).
        discounts, rewards, values, bootstrap_value, clip_*, lambda_: see
            ``from_importance_weights``.

    Returns:
        ``VTraceFromLogitsReturns``.
    """
    with torch.no_grad():
        behaviour_log_probs = categorical_log_probs(behaviour_policy_logits, actions)
    target_log_probs = categorical_log_probs(target_policy_logits, actions)
    log_rhos = target_log_probs.detach() - behaviour_log_probs
    returns = from_importance_weights(
        log_rhos, discounts, rewards, values.detach(), bootstrap_value.detach(),
        clip_rho_threshold, clip_c_threshold, clip_pg_rho_threshold, lambda_)
    return VTraceFromLogitsReturns(vs=returns.vs, pg_advantages=returns.pg_advantages,
                                   log_rhos=log_rhos,
                                   behaviour_action_log_probs=behaviour_log_probs,
                                   target_action_log_probs=target_log_probs)
