"""A check shared by the tests of algorithms with one optimizer per part (SAC, IQL): after
``update_with_gradient`` on a dict of loss terms, every parameter's gradient is its own
term's alone."""

import torch
from tests.algorithms._learners import learner_of


def assert_each_term_trains_only_its_own(alg, loss, owners, atol):
    """Updates ``alg`` on ``loss`` and asserts that each parameter's ``.grad`` is the
    gradient of the mean of the one term that owns it.

    Args:
        alg: the algorithm, before the update.
        loss: its ``LossInfo`` with ``loss`` a dict of terms.
        owners: ``{term: parameter-name prefix, or a tuple of them}``.
        atol: the tolerance of the comparison.
    """
    expected = {}
    for term, prefix in owners.items():
        own = [(n, p) for n, p in alg.named_parameters() if n.startswith(prefix)]
        grads = torch.autograd.grad(loss.loss[term].mean(), [p for _, p in own],
                                    retain_graph=True)
        expected.update({n: g for (n, _), g in zip(own, grads)})
    learner_of(alg).update_with_gradient(loss)
    for name, p in alg.named_parameters():
        if p.requires_grad:
            assert torch.allclose(p.grad, expected[name], atol=atol), name
