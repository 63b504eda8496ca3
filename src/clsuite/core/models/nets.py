"""Backbones of the paper (Sec. V-A-3): one head over all classes.

- MLP 784-400-400-C with ReLU (GEM, MER): 478,410 parameters for C = 10.
- Reduced ResNet-18 with nf = 20 (GEM's and MIR's CIFAR backbone, from iCaRL's
  code base): BasicBlocks [2, 2, 2, 2] with widths nf, 2nf, 4nf, 8nf, a 3x3 stem
  without pooling, 4x4 average pooling: 1,094,750 parameters for C = 10. On the CPU
  with oneDNN (``trainer.numerics=native``) its activations are channels-last (NHWC:
  oneDNN's faster convolutions, the same sums in another order); its weights stay
  contiguous, so flattened gradients (GEM, A-GEM, GSS) keep their order
  (docs/notes/PERFORMANCE.md, "The reduced ResNet-18 on the CPU"). Inside a functorch
  transform (``torch.func.vmap``: oEWC's Fisher, GSS's per-sample gradients) they stay
  NCHW: vmap cannot clone into channels-last.
- ``norm_groups`` (null: BatchNorm, the paper's): every BatchNorm of the ResNet becomes Continual
  Normalization (Pham, Liu and Hoi, ICLR 2022; phquang/Continual-Normalization, ``cn.py``): each sample's
  channels normalised in G groups without scale or shift, then BatchNorm as before (docs/METHODS.md,
  "BatchNorm in this protocol").
"""

from __future__ import annotations

import math
from itertools import pairwise

import torch
import torch.nn.functional as F
from torch import nn


class MLP(nn.Module):
    def __init__(self, input_shape, num_classes: int, hidden: int = 400, depth: int = 2):
        super().__init__()
        dims = [math.prod(input_shape)] + [hidden] * depth
        layers = []
        for a, b in pairwise(dims):
            layers += [nn.Linear(a, b), nn.ReLU()]
        self.features = nn.Sequential(nn.Flatten(), *layers)
        self.head = nn.Linear(dims[-1], num_classes)

    def forward(self, x, return_features: bool = False):
        h = self.features(x)
        return (self.head(h), h) if return_features else self.head(h)


class ContinualNorm(nn.BatchNorm2d):
    """Continual Normalization: GroupNorm over ``groups`` groups (no affine, BatchNorm's eps), then this
    BatchNorm (its running statistics, scale and shift). A BatchNorm still: ``eval_bn=memory`` re-estimates it."""

    def __init__(self, channels: int, groups: int):
        super().__init__(channels)
        self.groups = groups

    def forward(self, x):
        return super().forward(F.group_norm(x, self.groups, eps=self.eps))


def norm2d(channels: int, groups: int | None) -> nn.BatchNorm2d:
    return nn.BatchNorm2d(channels) if groups is None else ContinualNorm(channels, groups)


class BasicBlock(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int, norm_groups: int | None = None):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = norm2d(cout, norm_groups)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = norm2d(cout, norm_groups)
        self.shortcut = nn.Sequential()
        if stride != 1 or cin != cout:
            self.shortcut = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), norm2d(cout, norm_groups))

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + self.shortcut(x))


NHWC_MIN_CHANNELS = 8  # the narrowest ResNet whose CPU activations go channels-last (docs/notes/PERFORMANCE.md)


class ReducedResNet18(nn.Module):
    def __init__(self, input_shape, num_classes: int, nf: int = 20, norm_groups: int | None = None):
        super().__init__()
        cin = input_shape[0]
        self.conv1 = nn.Conv2d(cin, nf, 3, 1, 1, bias=False)
        self.bn1 = norm2d(nf, norm_groups)
        widths, layers, c = [nf, 2 * nf, 4 * nf, 8 * nf], [], nf
        for i, w in enumerate(widths):
            stride = 1 if i == 0 else 2
            layers += [BasicBlock(c, w, stride, norm_groups), BasicBlock(w, w, 1, norm_groups)]
            c = w
        self.layers = nn.Sequential(*layers)
        self.head = nn.Linear(8 * nf, num_classes)

    def forward(self, x, return_features: bool = False):
        cpu_onednn = x.device.type == "cpu" and x.dim() == 4 and torch.backends.mkldnn.enabled  # (native numerics)
        # (under 8 channels, oneDNN's NHWC backward hangs or corrupts the heap on AVX2 CPUs, torch 2.13: NCHW)
        cpu_onednn = cpu_onednn and self.conv1.out_channels >= NHWC_MIN_CHANNELS
        if cpu_onednn and not torch._C._functorch.is_functorch_wrapped_tensor(x):  # vmap: NYI for channels-last
            x = x.contiguous(memory_format=torch.channels_last)
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.layers(out)
        h = F.adaptive_avg_pool2d(out, 1).flatten(1)
        return (self.head(h), h) if return_features else self.head(h)


ARCHS = {"mlp": MLP, "resnet18": ReducedResNet18}


def build_model(arch: str, input_shape, num_classes: int, **kw) -> nn.Module:
    if arch not in ARCHS:
        raise ValueError(f"unknown model arch {arch!r}; valid: {', '.join(ARCHS)}")
    if arch == "mlp":
        return MLP(input_shape, num_classes, hidden=kw.get("hidden", 400), depth=kw.get("depth", 2))
    return ReducedResNet18(input_shape, num_classes, nf=kw.get("nf", 20), norm_groups=kw.get("norm_groups"))
