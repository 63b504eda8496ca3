"""The reduced ResNet-18 inside torch.func transforms on the CPU: oEWC's Fisher and GSS's per-sample
gradients (vmap) run, in NCHW, and give the per-sample gradients one backward per sample gives; outside a
transform the activations stay channels-last from 8 channels on (docs/notes/PERFORMANCE.md, "The reduced ResNet-18
on the CPU")."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F

from clsuite.core.memory.gss_greedy import _vmap_grads
from clsuite.core.methods.oewc import empirical_fisher
from clsuite.core.models.nets import NHWC_MIN_CHANNELS, ReducedResNet18

pytestmark = pytest.mark.skipif(
    not (torch.backends.mkldnn.is_available() and torch.backends.mkldnn.enabled), reason="channels-last: oneDNN only"
)


def net_and_batch(n=3, classes=4, nf=4):
    torch.manual_seed(0)
    net = ReducedResNet18((3, 32, 32), classes, nf=nf).eval()
    x, y = torch.randn(n, 3, 32, 32), torch.arange(n) % classes
    return net, x, y, torch.ones(n, classes, dtype=torch.bool)


def per_sample_loop(net, x, y):
    rows = []
    for i in range(len(y)):
        net.zero_grad()
        F.cross_entropy(net(x[i : i + 1].contiguous()), y[i : i + 1]).backward()
        rows.append(torch.cat([p.grad.reshape(-1) for p in net.parameters()]))
    return torch.stack(rows)


def test_gss_per_sample_gradients_under_vmap_run_on_the_resnet():
    """vmap cannot clone into channels-last (NYI): inside it the network stays NCHW, and the gradients are the
    loop's (another summation order: close, not bit for bit)."""
    net, x, y, allowed = net_and_batch()
    g = _vmap_grads(net, x, y, allowed, groups=0)
    loop = per_sample_loop(net, x, y)
    assert g.shape == (3, sum(p.numel() for p in net.parameters()))
    torch.testing.assert_close(g, loop, rtol=1e-4, atol=1e-5)


def test_oewc_fisher_runs_on_the_resnet():
    net, x, y, allowed = net_and_batch()
    learner = SimpleNamespace(net=net, logit_mask=lambda t: allowed)
    fisher = empirical_fisher(learner, x, y, torch.zeros_like(y), chunk=2)
    assert fisher.shape == (sum(p.numel() for p in net.parameters()),) and bool(fisher.isfinite().all())
    assert float(fisher.sum()) > 0


@pytest.mark.parametrize("nf, nhwc", [(NHWC_MIN_CHANNELS, True), (NHWC_MIN_CHANNELS - 1, False), (4, False)])
def test_outside_a_transform_the_activations_stay_channels_last_from_8_channels(nf, nhwc):
    """Channels-last from NHWC_MIN_CHANNELS on (nf = 20 in every paper run); a narrower net stays NCHW: under 8
    channels oneDNN's NHWC backward hung or corrupted the heap on an AVX2 CPU (torch 2.13)."""
    net, x, _, _ = net_and_batch(nf=nf)
    seen = []
    net.conv1.register_forward_hook(lambda m, inputs, out: seen.append(inputs[0]))
    net(x)
    assert seen[0].is_contiguous(memory_format=torch.channels_last) == nhwc and seen[0].is_contiguous() != nhwc
