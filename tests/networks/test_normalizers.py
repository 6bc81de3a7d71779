"""ObservationNormalizer: its merged statistics against numpy's float64 mean and variance of
all the data, a hand-computed standardisation and clip, and the encoders that hold one."""

import numpy as np
import pytest
import torch

from rlf.networks import CriticNetwork, MLPEncoder, ObservationNormalizer, ValueNetwork
from rlf.tensor_specs import BoundedTensorSpec, TensorSpec


def test_statistics_merged_batch_by_batch_equal_those_of_all_the_data():
    rng = np.random.default_rng(0)
    batches = [rng.normal(loc=[5.0, -300.0, 0.0], scale=[0.01, 40.0, 3.0], size=(n, 3))
               for n in (1, 7, 256, 3)]
    norm = ObservationNormalizer((3,))
    for b in batches:
        norm.update(torch.tensor(b, dtype=torch.float32).view(len(b), 1, 3))  # [T, B=1, 3]
    data = np.concatenate([b.astype(np.float32).astype(np.float64) for b in batches])
    assert float(norm.count) == len(data)
    np.testing.assert_allclose(norm.mean.numpy(), data.mean(0), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(norm.var.numpy(), data.var(0), rtol=1e-10)
    norm.update(torch.zeros(0, 3))  # an empty batch changes nothing
    assert float(norm.count) == len(data)


def test_standardises_and_clips_a_hand_computed_case():
    norm = ObservationNormalizer((2,), clipping=10.0)
    x = torch.tensor([[1.0, 2.0]])
    assert torch.equal(norm(x), x)  # the identity before any update
    norm.update(torch.tensor([[0.0, 10.0], [2.0, 10.0], [4.0, 10.0]]))
    # mean (2, 10), population variance (8/3, 0)
    y = norm(torch.tensor([[5.0, 10.0], [100.0, 10.5]]))
    assert y.dtype == torch.float32
    assert y[0, 0].item() == pytest.approx(3.0 / np.sqrt(8.0 / 3.0), rel=1e-6)
    assert y[0, 1].item() == 0.0  # an entry that never varied
    assert y[1].tolist() == [10.0, 10.0]  # clipped
    assert float(norm.count) == 3  # forward changed nothing
    with pytest.raises(ValueError, match=r"observations of shape \(4, 3\) do not end with "
                                         r"the observation shape \(2,\)"):
        norm(torch.zeros(4, 3))
    with pytest.raises(ValueError, match="epsilon"):
        ObservationNormalizer((2,), epsilon=0.0)


def test_networks_standardise_their_observation_input_only():
    obs, act = TensorSpec((3,)), BoundedTensorSpec((2,), torch.float32, -1.0, 1.0)
    torch.manual_seed(0)
    encoder = MLPEncoder(obs, normalize_observations=True)
    critic = CriticNetwork(obs, act, normalize_observations=True)
    value = ValueNetwork(obs, normalize_observations=True)
    data = torch.randn(50, 3) * 100 + 7
    x, a = torch.randn(4, 3) * 100 + 7, torch.rand(4, 2)
    for net in (encoder, critic, value):
        net.normalizer.update(data)
    z = encoder.normalizer(x)
    assert torch.allclose(encoder(x), encoder.net(z))
    assert torch.allclose(critic(x, a), critic.net(torch.cat([z, a], -1)).squeeze(-1))
    assert torch.allclose(value(x), value.net(z).squeeze(-1))
    # Without the option there is no normalizer and no new state_dict key.
    assert MLPEncoder(obs).normalizer is None
    assert not any("normalizer" in k for k in CriticNetwork(obs, act).state_dict())
