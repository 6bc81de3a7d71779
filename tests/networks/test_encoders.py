import copy
import re

import numpy as np
import pytest
import torch

from rlf.networks.encoders import FrameConv2d, ImpalaCNN, NatureCNN, ShallowCNN, orthogonal_init_
from rlf.tensor_specs import TensorSpec


@pytest.fixture(scope="module")
def pong_frames():
    """160 real stacked Pong observations ``[160, 4, 84, 84]`` uint8 under random actions."""
    from ale_py.vector_env import AtariVectorEnv
    env = AtariVectorEnv("pong", 16, num_threads=1)
    env.reset(seed=0)
    rng = np.random.default_rng(0)
    frames = []
    for t in range(200):
        obs = env.step(rng.integers(0, 6, 16))[0]
        if t % 20 == 0:
            frames.append(obs)
    env.close()
    return torch.from_numpy(np.concatenate(frames))


def _feature_spread(encoder, frames):
    with torch.no_grad():
        return float(encoder(frames).std(0).mean())


def test_nature_cnn_features_tell_pong_states_apart(pong_frames):
    # PyTorch's default init leaves the 512 features nearly constant across Pong frames
    # (~7e-4); the critic then could not learn (explained variance ~0.001 over 1M steps).
    torch.manual_seed(0)
    spec = TensorSpec((4, 84, 84), torch.uint8)
    assert _feature_spread(NatureCNN(spec), pong_frames) > 0.01
    assert _feature_spread(NatureCNN(spec, orthogonal_init=False), pong_frames) < 0.005


def test_shallow_cnn_is_the_papers_shallow_encoder(pong_frames):
    # Espeholt et al. 2018, Fig. 3 left: conv 16x8x8/4, conv 32x4x4/2, FC 256 (with ReLUs).
    torch.manual_seed(0)
    enc = ShallowCNN(TensorSpec((4, 84, 84), torch.uint8))
    convs = [m for m in enc.modules() if isinstance(m, torch.nn.Conv2d)]
    assert [(c.in_channels, c.out_channels, c.kernel_size, c.stride) for c in convs] == [
        (4, 16, (8, 8), (4, 4)), (16, 32, (4, 4), (2, 2))]
    assert enc.fc[0].in_features == 32 * 9 * 9 and enc.output_size == 256
    out = enc(pong_frames)
    assert out.shape == (160, 256) and out.dtype == torch.float32
    assert _feature_spread(enc, pong_frames) > 0.01


def test_orthogonal_init_is_orthogonal_with_zero_bias():
    torch.manual_seed(0)
    enc = orthogonal_init_(NatureCNN(TensorSpec((4, 84, 84), torch.uint8),
                                     channels_last=False), gain=2.0)
    w = enc.fc[0].weight  # [512, 3136]: orthonormal rows times the gain
    assert torch.allclose(w @ w.T, 4.0 * torch.eye(512), atol=1e-4)
    assert all(not m.bias.detach().any() for m in enc.modules()
               if isinstance(m, (torch.nn.Conv2d, torch.nn.Linear)))


def test_channels_last_does_not_change_the_output(pong_frames):
    torch.manual_seed(0)
    a = NatureCNN(TensorSpec((4, 84, 84), torch.uint8), channels_last=False)
    b = NatureCNN(TensorSpec((4, 84, 84), torch.uint8), channels_last=True)
    b.load_state_dict(a.state_dict())
    with torch.no_grad():
        assert torch.allclose(a(pong_frames[:8]), b(pong_frames[:8]), atol=1e-5)
    # The input follows the weights' layout: an actor's copy switched to the contiguous
    # format (build_actor) runs its convolutions in that format, with the same output.
    layouts = []
    for enc in (b, copy.deepcopy(b).to(memory_format=torch.contiguous_format)):
        hook = enc.conv[0].register_forward_hook(
            lambda m, inp, out: layouts.append(out.is_contiguous()))
        with torch.no_grad():
            assert torch.allclose(enc(pong_frames[:8]), a(pong_frames[:8]), atol=1e-5)
        hook.remove()
    assert layouts == [False, True]
    assert ImpalaCNN(TensorSpec((4, 84, 84), torch.uint8))(pong_frames[:2]).shape == (2, 256)


def test_scale_gives_frames_in_unit_range_in_the_requested_memory_format(pong_frames):
    from rlf.networks.encoders import _scale
    x = pong_frames[:4]
    y = _scale(x, torch.channels_last)
    assert y.dtype == torch.float32 and y.is_contiguous(memory_format=torch.channels_last)
    assert torch.allclose(y, x.double().div(255.0).float(), rtol=0, atol=1e-7)
    assert float(y.max()) <= 1.0 and float(y.min()) >= 0.0
    # Every path (OpenCV's interleave into channels-last, the in-place scale, the general
    # fallback for a non-contiguous slice) gives the values of float32(x) * float32(1/255).
    for frames in (pong_frames[:16], pong_frames[:16, :, ::2], pong_frames[:3, :1]):
        for fmt in (torch.channels_last, torch.contiguous_format):
            expected = torch.mul(frames, 1.0 / 255.0,
                                 out=torch.empty(frames.shape, memory_format=fmt))
            got = _scale(frames, fmt)
            assert torch.equal(got, expected) and got.is_contiguous(memory_format=fmt)
            raw = _scale(frames, fmt, divide=False)  # for a first layer that folds 1/255
            assert torch.equal(raw, frames.float()) and raw.is_contiguous(memory_format=fmt)
    # Off the CPU (here the data-less "meta" device) the one-kernel path keeps dtype and layout.
    meta = _scale(torch.empty(2, 4, 5, 5, dtype=torch.uint8, device="meta"), torch.channels_last)
    assert meta.dtype == torch.float32 and meta.is_contiguous(memory_format=torch.channels_last)
    f = torch.rand(2, 3, requires_grad=True)  # float inputs are cast only, keeping the graph
    _scale(f).sum().backward()
    assert torch.equal(f.grad, torch.ones(2, 3))


@pytest.mark.parametrize("channels_last", [True, False])
def test_uint8_frames_give_the_values_and_gradients_of_frames_divided_by_255(
        pong_frames, channels_last):
    # The conv stacks fold the 1/255 into their first layer's weights for uint8 frames;
    # that must be the network of the float frames x / 255, gradients included.
    torch.manual_seed(0)
    spec = TensorSpec((4, 84, 84), torch.uint8)
    for enc in (NatureCNN(spec, channels_last=channels_last),
                ShallowCNN(spec, channels_last=channels_last),
                ImpalaCNN(spec).to(memory_format=torch.channels_last if channels_last
                                   else torch.contiguous_format)):
        frames = pong_frames[:24]
        folded = enc(frames)
        grad_folded = torch.autograd.grad(folded.square().sum(), list(enc.parameters()))
        scaled = enc(frames.double().div(255.0).float())
        grad_scaled = torch.autograd.grad(scaled.square().sum(), list(enc.parameters()))
        assert torch.allclose(folded, scaled, rtol=1e-5, atol=1e-5)
        for name, a, b in zip([n for n, _ in enc.named_parameters()], grad_folded,
                              grad_scaled):  # float32 sums over 24 frames: compare norms
            assert float((a - b).norm() / b.norm()) < 1e-4, name
        # The weights themselves are not rescaled (checkpoints keep their meaning).
        assert isinstance(enc.conv[0], FrameConv2d)
        assert float(enc.conv[0].weight.detach().abs().max()) > 0.05


@pytest.mark.parametrize("cls", [NatureCNN, ShallowCNN, ImpalaCNN])
def test_observations_that_are_not_big_enough_frames_are_refused(cls):
    # Before, a vector observation (an Atari conf on CartPole) or frames too small for the
    # kernels failed inside conv2d with a RuntimeError and a traceback.
    with pytest.raises(ValueError, match=re.escape(
            f"{cls.__name__} needs [C, H, W] frames (e.g. (4, 84, 84)), got observations of "
            f"shape (4,)")):
        cls(TensorSpec((4,), torch.float32))
    with pytest.raises(ValueError, match=re.escape(  # load_atari.grayscale = False
            "got observations of shape (4, 84, 84, 3); stacked colour frames")):
        cls(TensorSpec((4, 84, 84, 3), torch.uint8))
    if cls is not ImpalaCNN:  # its padded convolutions take any frame size
        with pytest.raises(ValueError, match=re.escape(
                f"{cls.__name__}: frames of shape (4, 10, 10) are too small for its kernels")):
            cls(TensorSpec((4, 10, 10), torch.uint8))
        with pytest.raises(ValueError, match=r"too small for its kernels \(.*\); it takes "
                                             r"\[C, H, W\] frames: for channels-last images "
                                             r"set load_gym.channels_first = True"):
            cls(TensorSpec((64, 64, 3), torch.uint8))


def test_default_networks_refuse_a_nested_observation_naming_the_fix():
    from rlf.networks import ActorCriticNetwork, CriticNetwork, QNetwork
    from rlf.tensor_specs import BoundedTensorSpec
    nested = (BoundedTensorSpec((), torch.int64, 0, 31), BoundedTensorSpec((), torch.int64, 0, 1))
    discrete = BoundedTensorSpec((), torch.int64, 0, 1)
    box = BoundedTensorSpec((1,), torch.float32, -1.0, 1.0)
    for make, owner in [(lambda: ActorCriticNetwork(nested, discrete), "ActorCriticNetwork"),
                        (lambda: QNetwork(nested, discrete), "QNetwork"),
                        (lambda: CriticNetwork(nested, box), "CriticNetwork")]:
        with pytest.raises(ValueError, match=re.escape(
                f"{owner}: the observation is a nest (tuple of specs) and {owner}'s encoders "
                f"take one tensor; flatten it with load_gym.flatten_observations = True")):
            make()


def test_scalar_observations_are_one_feature():
    from rlf.networks import CriticNetwork, MLPEncoder
    from rlf.tensor_specs import BoundedTensorSpec
    spec = TensorSpec(())
    encoder = MLPEncoder(spec, hidden=(8,))
    assert encoder(torch.tensor([0.5, -1.0])).shape == (2, 8)
    critic = CriticNetwork(spec, BoundedTensorSpec((), torch.float32, -1.0, 1.0), hidden=(8,))
    assert critic(torch.tensor([0.5, -1.0]), torch.tensor([0.1, 0.2])).shape == (2,)
