"""Observation encoders: MLP, NatureCNN (Mnih et al. 2015), and IMPALA's shallow CNN and deep
ResNet (Espeholt et al. 2018, Fig. 3 left and right). Image encoders take ``uint8`` frames
and divide by 255 inside, so frames stay ``uint8`` until the first layer (docs/design.md,
"Data conventions")."""

from __future__ import annotations

from typing import Any, Callable, List, Sequence, Tuple, Type

import gin
import numpy as np
import torch
from torch import nn

from rlf.networks.normalizers import ObservationNormalizer
from rlf.tensor_specs import TensorSpec
from rlf.utils.errors import one_line

__all__ = ["MLPEncoder", "FrameConv2d", "NatureCNN", "ShallowCNN", "ImpalaCNN",
           "orthogonal_init_", "require_tensor_spec", "default_encoder_ctor",
           "encoder_output_size"]


def require_tensor_spec(owner: str, observation_spec: Any) -> TensorSpec:
    """Returns ``observation_spec`` if it is one ``TensorSpec``.

    Raises:
        ValueError: for a nest of specs (a ``Dict`` or ``Tuple`` observation space), naming
            ``owner`` and the two ways to feed it.
    """
    if not isinstance(observation_spec, TensorSpec):
        raise ValueError(
            f"{owner}: the observation is a nest ({type(observation_spec).__name__} of "
            f"specs) and {owner}'s encoders take one tensor; flatten it with "
            f"load_gym.flatten_observations = True (gymnasium's FlattenObservation) or give "
            f"an encoder_ctor that takes the nest")
    return observation_spec


def default_encoder_ctor(owner: str, observation_spec: Any) -> Callable[..., nn.Module]:
    """``NatureCNN`` for rank-3 observations (frames ``[C, H, W]``), ``MLPEncoder`` otherwise.

    Raises:
        ValueError: for a nest of specs (``require_tensor_spec``).
    """
    spec = require_tensor_spec(owner, observation_spec)
    return NatureCNN if len(spec.shape) == 3 else MLPEncoder


def encoder_output_size(encoder: nn.Module) -> int:
    """``encoder.output_size``: the width of its ``[B, output_size]`` features (every
    encoder an ``encoder_ctor`` makes has one).

    Raises:
        AttributeError: for a module without ``output_size``.
    """
    size: Any = encoder.output_size
    return int(size)


def orthogonal_init_(module: nn.Module, gain: float = 2 ** 0.5) -> nn.Module:
    """Orthogonal weights with ``gain`` and zero biases for every conv and linear layer of
    ``module`` (Saxe et al. 2014; the init of OpenAI baselines' and CleanRL's Atari agents).

    Why: PyTorch's default init shrinks the signal at every layer. On Pong frames (a constant
    background with a few moving pixels) NatureCNN's default-initialised 512 features vary
    across states by ~7e-4, so the value head cannot tell states apart and the critic's
    explained variance stayed at ~0.001 for 1M agent steps; with this init they vary by ~3e-2.

    Args:
        module: initialised in place.
        gain: the orthogonal matrices' scale; ``sqrt(2)`` suits ReLU layers.

    Returns:
        ``module``.
    """
    for m in module.modules():
        if isinstance(m, (nn.Conv2d, nn.Linear)):
            nn.init.orthogonal_(m.weight, gain)
            if m.bias is not None:
                nn.init.zeros_(m.bias)
    return module


def _scale(x: torch.Tensor, memory_format=torch.contiguous_format,
           divide: bool = True) -> torch.Tensor:
    """uint8 frames -> float32 in [0, 1] in ``memory_format``; float inputs are cast to
    float32 and laid out in ``memory_format`` (keeping their graph).

    ``x / 255`` is computed as ``float32(x) * float32(1 / 255)`` on every path, so the values
    are the same whichever path runs. With ``divide=False`` uint8 frames only become float32
    (0 to 255), for a caller that folds the 1/255 into its first layer's weights.

    On CPU (one torch thread, 320 frames of ``4 x 84 x 84``, the learner's batch; the
    ranges span repeated runs on a VM whose speed drifts): converting to float and scaling in
    place took 5.2-5.5 ms against 8.9-9.3 ms for one mixed-dtype ``torch.mul(x, 1 / 255,
    out=...)``. Into ``channels_last``, torch's own copy interleaves 4 channels at ~1 ns per
    byte (10 ms for the uint8 batch alone); OpenCV's ``cv2.merge`` interleaves each frame's
    channel planes in 1.3-1.7 ms, and the whole conversion took 8.3-8.9 ms against
    12.3-18.8 ms (``bench/frame_conversion.py``). Other devices keep the one
    ``torch.mul(..., out=...)`` used before, a single kernel on a GPU (not re-measured: no
    GPU was at hand).
    """
    if x.dtype != torch.uint8:
        return x.float().contiguous(memory_format=memory_format)
    if x.device.type != "cpu":  # one fused kernel there, instead of three passes
        out = torch.empty(x.shape, dtype=torch.float32, device=x.device,
                          memory_format=memory_format)
        return torch.mul(x, 1.0 / 255.0, out=out) if divide else out.copy_(x)
    if (memory_format == torch.channels_last and x.dim() == 4 and x.is_contiguous()
            and not x.is_contiguous(memory_format=torch.channels_last)
            and x.shape[1] <= 512  # 512: cv2.merge's channel limit (CV_CN_MAX)
            and not _recording()):
        y = _interleave_channels(x).float()
        return (y.mul_(1.0 / 255.0) if divide else y).permute(0, 3, 1, 2)
    y = x.float().contiguous(memory_format=memory_format)
    return y.mul_(1.0 / 255.0) if divide else y


def _recording() -> bool:
    """Whether a graph is being recorded (``torch.jit.trace``, ``torch.export``,
    ``torch.compile``; ``rlf.api.export``): the NumPy path would be baked in as a constant
    or refused, so torch's own copy is taken."""
    return torch.jit.is_tracing() or torch.compiler.is_compiling()


def _interleave_channels(x: torch.Tensor) -> torch.Tensor:
    """``[N, C, H, W]`` contiguous uint8 (CPU) -> ``[N, H, W, C]`` contiguous uint8."""
    import cv2  # opencv-python-headless, a dependency already (gymnasium's Atari wrappers)
    frames = x.numpy()
    out = np.empty((frames.shape[0],) + frames.shape[2:] + (frames.shape[1],), np.uint8)
    for frame, dst in zip(frames, out):
        cv2.merge(list(frame), dst=dst)
    return torch.from_numpy(out)


@gin.configurable
class MLPEncoder(nn.Module):
    """Flattens ``[B, ...]`` observations and applies fully connected layers.

    Args:
        input_spec: ``TensorSpec`` of one observation.
        hidden: sizes of the hidden layers.
        activation: activation class.
        normalize_observations: standardise the observations first by their running mean
            and variance (``ObservationNormalizer``, which ``RLAlgorithm`` updates after
            each unroll) instead of only casting them to float32 (uint8: dividing by 255).

    Attributes:
        output_size: features per sample.
        normalizer: the ``ObservationNormalizer``, or None.

    Raises:
        ValueError: for a nest of specs (``require_tensor_spec``).
    """

    def __init__(self, input_spec: TensorSpec, hidden: Sequence[int] = (64, 64),
                 activation: Type[nn.Module] = nn.Tanh, normalize_observations: bool = False):
        super().__init__()
        layers, n = [], int(require_tensor_spec("MLPEncoder", input_spec).numel)
        self.normalizer = (ObservationNormalizer(input_spec.shape) if normalize_observations
                           else None)
        for h in hidden:
            layers += [nn.Linear(n, h), activation()]
            n = h
        self.net = nn.Sequential(*layers)
        self.output_size = n

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        """``[B, ...]`` -> ``[B, output_size]`` float32 (``[B]`` scalars are one feature)."""
        x = _scale(obs) if self.normalizer is None else self.normalizer(obs)
        return self.net(x.reshape(obs.shape[0], -1))


class FrameConv2d(nn.Conv2d):
    """An ``nn.Conv2d`` (same arguments, parameters and state-dict keys) that also takes
    ``uint8`` frames, as the first layer of an image encoder.

    ``uint8`` input (0 to 255) is converted to float32 and convolved with ``weight / 255``:
    ``conv(x / 255, W) + b == conv(x, W / 255) + b``, so the result is the layer's output for
    the frames in ``[0, 1]`` (up to float rounding) while the weights keep that meaning.
    Scaling NatureCNN's 8,192 first-layer weights instead of the 9.5M input values of the
    learner's 336 frames saves a pass over its 38 MB float batch (forward and backward over
    336 frames: 157.8 against 160.6 ms, one thread; 2.81 against 2.87 ms for an actor's
    16-frame forward pass). Float input is convolved as it is. Either way the input is laid
    out in the weight's memory format first (oneDNN would convert a mismatched input).

    Args: those of ``nn.Conv2d``. Called on ``[B, C, H, W]`` uint8 or floating-point input;
    returns ``[B, out_channels, H', W']`` float32. The fold is exact for every
    ``padding_mode`` (padding commutes with scaling).
    """

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Convolves ``x`` ``[B, C, H, W]`` (uint8 or float) into ``[B, out, H', W']`` float32."""
        fmt = (torch.contiguous_format if self.weight.is_contiguous()
               else torch.channels_last)
        if x.dtype != torch.uint8:
            return super().forward(_scale(x, fmt))
        return self._conv_forward(_scale(x, fmt, divide=False), self.weight * (1.0 / 255.0),
                                  self.bias)


def _check_frames(name: str, input_spec: TensorSpec) -> None:
    """Raises ``ValueError`` unless ``input_spec`` is ``[C, H, W]``."""
    if len(input_spec.shape) != 3:
        hint = ("stacked colour frames (load_atari.grayscale = False) are not supported: keep "
                "grayscale frames or give an encoder_ctor that takes them"
                if len(input_spec.shape) == 4 else
                "vector observations need an MLP encoder (MLPEncoder)")
        raise ValueError(f"{name} needs [C, H, W] frames (e.g. (4, 84, 84)), got "
                         f"observations of shape {tuple(input_spec.shape)}; {hint}")


class _ConvStack(nn.Module):
    """Valid-padded convolutions with ReLUs, flattened, then one linear layer with ReLU: the
    shape shared by NatureCNN and IMPALA's shallow encoder.

    Args:
        input_spec: ``TensorSpec((C, H, W))``, e.g. ``(4, 84, 84)`` uint8 stacked frames.
        conv_layers: ``(out_channels, kernel_size, stride)`` per convolution.
        output_size: units of the final linear layer.
        channels_last: run the convolutions in ``torch.channels_last`` memory format. On
            this project's 2-core CPU (oneDNN, one thread) forward plus backward over 80-320
            frames was 1.1-1.8x faster with it, while a no-grad forward over 16 frames was
            1.2-1.6x slower. The input follows the weights' layout at each call, so
            ``module.to(memory_format=torch.contiguous_format)`` switches a copy that only
            acts (an actor process) to the other layout.
        orthogonal_init: initialise with ``orthogonal_init_`` (gain ``sqrt(2)``) instead of
            PyTorch's default; without it Pong did not learn in 4M frames.

    Attributes:
        output_size: features per sample.

    Raises:
        ValueError: for an ``input_spec`` that is not ``[C, H, W]`` or whose frames are too
            small for the kernels.
    """

    def __init__(self, input_spec: TensorSpec, conv_layers: Sequence[Tuple[int, int, int]],
                 output_size: int, channels_last: bool = True, orthogonal_init: bool = True):
        super().__init__()
        name = type(self).__name__
        _check_frames(name, input_spec)
        c = input_spec.shape[0]
        layers: List[nn.Module] = []
        for out, kernel, stride in conv_layers:
            conv = FrameConv2d if not layers else nn.Conv2d
            layers += [conv(c, out, kernel, stride=stride), nn.ReLU()]
            c = out
        self.conv = nn.Sequential(*layers, nn.Flatten())
        try:
            with torch.no_grad():
                n = self.conv(torch.zeros(1, *input_spec.shape)).shape[1]
        except RuntimeError as e:
            shape = tuple(input_spec.shape)
            hint = ("; it takes [C, H, W] frames: for channels-last images set "
                    "load_gym.channels_first = True" if shape[-1] < shape[0] else "")
            raise ValueError(f"{name}: frames of shape {shape} are too small for its kernels "
                             f"({one_line(e)}){hint}") from None
        self.fc = nn.Sequential(nn.Linear(n, output_size), nn.ReLU())
        self.output_size = output_size
        if orthogonal_init:
            orthogonal_init_(self)  # before channels_last: orthogonal_ needs contiguous weights
        if channels_last:
            self.conv.to(memory_format=torch.channels_last)  # type: ignore[call-overload]

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        """``[B, C, H, W]`` uint8 (or float in [0, 1]) -> ``[B, output_size]`` float32."""
        return self.fc(self.conv(obs))  # conv[0], a FrameConv2d, takes uint8 frames


@gin.configurable
class NatureCNN(_ConvStack):
    """DQN's encoder: conv 32x8x8/4, 64x4x4/2, 64x3x3/1, then a 512-unit linear layer, each
    followed by ReLU (Mnih et al. 2015, "Methods"). About 1.7M parameters and 9.4M
    multiply-adds per 84x84 observation.

    Args:
        input_spec, output_size, channels_last, orthogonal_init: see ``_ConvStack``.

    Called on ``[B, C, H, W]`` uint8 frames (or float32 in [0, 1]), returns ``[B,
    output_size]`` float32 features. Raises ``ValueError`` at construction for observations
    that are not ``[C, H, W]`` or whose ``H, W`` are too small for the kernels.
    """

    def __init__(self, input_spec: TensorSpec, output_size: int = 512,
                 channels_last: bool = True, orthogonal_init: bool = True):
        super().__init__(input_spec, ((32, 8, 4), (64, 4, 2), (64, 3, 1)), output_size,
                         channels_last=channels_last, orthogonal_init=orthogonal_init)


@gin.configurable
class ShallowCNN(_ConvStack):
    """IMPALA's "shallow" encoder: conv 16x8x8/4, 32x4x4/2, then a 256-unit linear layer, each
    followed by ReLU (Espeholt et al. 2018, Fig. 3 left; the network of A3C, Mnih et al. 2016,
    and RLlib's default for 84x84 frames). About 0.7M parameters and 3.0M multiply-adds per
    84x84 observation, a third of NatureCNN's.

    Args:
        input_spec, output_size, channels_last, orthogonal_init: see ``_ConvStack``.

    Called on ``[B, C, H, W]`` uint8 frames (or float32 in [0, 1]), returns ``[B,
    output_size]`` float32 features. Raises ``ValueError`` at construction for observations
    that are not ``[C, H, W]`` or whose ``H, W`` are too small for the kernels.
    """

    def __init__(self, input_spec: TensorSpec, output_size: int = 256,
                 channels_last: bool = True, orthogonal_init: bool = True):
        super().__init__(input_spec, ((16, 8, 4), (32, 4, 2)), output_size,
                         channels_last=channels_last, orthogonal_init=orthogonal_init)


class _ResidualBlock(nn.Module):
    def __init__(self, channels: int):
        super().__init__()
        self.conv0 = nn.Conv2d(channels, channels, 3, padding=1)
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1)

    def forward(self, x):
        """``[B, C, H, W]`` -> same shape: ``x + conv(relu(conv(relu(x))))``."""
        return x + self.conv1(torch.relu(self.conv0(torch.relu(x))))


@gin.configurable
class ImpalaCNN(nn.Module):
    """IMPALA's "deep" encoder: per stage a 3x3 conv, 3x3 max-pool with stride 2 and two
    residual blocks; then ReLU, a 256-unit linear layer and ReLU (Espeholt et al. 2018, Fig. 3).

    Args:
        input_spec: ``TensorSpec((C, H, W))``.
        channels: output channels of the stages.
        output_size: units of the final linear layer.

    Raises:
        ValueError: for an ``input_spec`` that is not ``[C, H, W]``.
    """

    def __init__(self, input_spec: TensorSpec, channels: Sequence[int] = (16, 32, 32),
                 output_size: int = 256):
        super().__init__()
        _check_frames(type(self).__name__, input_spec)
        c = input_spec.shape[0]
        stages: List[nn.Module] = []
        for out in channels:
            conv = FrameConv2d if not stages else nn.Conv2d
            stages += [conv(c, out, 3, padding=1), nn.MaxPool2d(3, stride=2, padding=1),
                       _ResidualBlock(out), _ResidualBlock(out)]
            c = out
        self.conv = nn.Sequential(*stages, nn.ReLU(), nn.Flatten())
        with torch.no_grad():
            n = self.conv(torch.zeros(1, *input_spec.shape)).shape[1]
        self.fc = nn.Sequential(nn.Linear(n, output_size), nn.ReLU())
        self.output_size = output_size

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        """``[B, C, H, W]`` uint8 (or float in [0, 1]) -> ``[B, output_size]`` float32."""
        return self.fc(self.conv(obs))  # conv[0], a FrameConv2d, takes uint8 frames
