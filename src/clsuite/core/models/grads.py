"""Gradient vectors of a network (GEM, A-GEM, SI).

All parameters of ``net`` in ``net.parameters()`` order, flattened into one
vector; a parameter without a gradient counts as zeros.
"""

from __future__ import annotations

import torch


def flat_params(params) -> torch.Tensor:
    """theta as one vector (differentiable: usable inside a penalty)."""
    return torch.cat([p.reshape(-1) for p in params])


def flat_grad(params) -> torch.Tensor:
    """The current ``.grad`` of ``params`` as one vector (a copy)."""
    return torch.cat(
        [torch.zeros(p.numel(), device=p.device) if p.grad is None else p.grad.reshape(-1) for p in params]
    )


def write_grad(params, vec: torch.Tensor) -> None:
    """Write ``vec`` into the ``.grad`` of ``params`` (the inverse of ``flat_grad``)."""
    offset = 0
    for p in params:
        n = p.numel()
        chunk = vec[offset : offset + n].view_as(p).to(p.dtype)
        if p.grad is None:
            p.grad = chunk.clone()
        else:
            p.grad.copy_(chunk)
        offset += n
    if offset != vec.numel():
        raise ValueError(f"gradient vector has {vec.numel()} entries, parameters have {offset}")


def grad_vector(loss: torch.Tensor, params) -> torch.Tensor:
    """d loss / d params as one vector, without touching ``.grad``."""
    grads = torch.autograd.grad(loss, params, allow_unused=True)
    return torch.cat(
        [torch.zeros(p.numel(), device=p.device) if g is None else g.reshape(-1) for p, g in zip(params, grads)]
    )


# Modules a network may hold for ``per_sample_grads``: nothing that mixes samples (no BatchNorm).
_PER_SAMPLE_LEAVES = (torch.nn.Linear, torch.nn.ReLU, torch.nn.Flatten, torch.nn.Identity)


def linear_factors(net, x: torch.Tensor, per_sample_loss):
    """The factors of the per-sample gradients of ``per_sample_loss(net(x))`` (a [n] vector) for
    a network of Linear layers and ReLUs (the MLP): ([(parameter, a, delta)] in
    ``net.parameters()`` order, [n] values); None for any other network.

    One batched forward and one backward to the layers' outputs z give delta_n = dl_n / dz_n;
    a Linear layer's per-sample gradients are delta_n a_n^T (weight; ``a`` its input) and
    delta_n (bias; ``a`` None). These are the very products ``vmap(grad(l))`` forms (its
    per-sample mm over a batch of one makes one product per entry, and its forward is mm then
    + b, as here), so gradients built from them are bit-identical to vmap's
    (tests/core/test_perf_exact.py), without vmap's batching rules.
    """
    leaves = [m for m in net.modules() if not list(m.children())]
    if not all(isinstance(m, _PER_SAMPLE_LEAVES) for m in leaves):
        return None
    linears = [m for m in leaves if isinstance(m, torch.nn.Linear)]
    owners = {id(p): m for m in linears for p in m.parameters(recurse=False)}
    if len(owners) != len(list(net.parameters())):  # a parameter outside a Linear layer (or a shared one)
        return None
    seen: list[tuple[torch.nn.Linear, torch.Tensor, torch.Tensor]] = []

    def hook(m, inputs, out):  # z = a W' + b as vmap's batching rule forms it (mm, then + b: no addmm)
        a = inputs[0]
        z = torch.matmul(a, m.weight.T)
        z = z if m.bias is None else z + m.bias
        seen.append((m, a.detach(), z))
        return z

    handles = [m.register_forward_hook(hook) for m in linears]
    try:
        with torch.enable_grad():
            losses = per_sample_loss(net(x))
            if len(seen) != len(linears) or any(a.dim() != 2 for _, a, _ in seen):
                return None  # a layer used twice or not at all, or on [n, ..., d] inputs
            deltas = torch.autograd.grad(losses.sum(), [z for _, _, z in seen])
    finally:
        for h in handles:
            h.remove()
    by_module = {id(m): (a, d) for (m, a, _), d in zip(seen, deltas, strict=True)}
    factors = []
    for p in net.parameters():
        m = owners[id(p)]
        a, d = by_module[id(m)]
        factors.append((p, a if p is m.weight else None, d))
    return factors, losses.detach()


def per_sample_grads(net, x: torch.Tensor, per_sample_loss):
    """([n, P] per-sample gradients in ``net.parameters()`` order, [n] values) of
    ``per_sample_loss(net(x))``, written straight into one tensor from ``linear_factors``
    (bit-identical to ``torch.func.vmap(grad(...))``); None for a network other than the MLP."""
    found = linear_factors(net, x, per_sample_loss)
    if found is None:
        return None
    factors, losses = found
    n = len(x)
    g = torch.empty(n, sum(p.numel() for p, _, _ in factors), device=x.device, dtype=factors[0][2].dtype)
    offset = 0
    for p, a, d in factors:
        block = g[:, offset : offset + p.numel()]
        if a is None:
            block.copy_(d)
        else:
            torch.mul(d[:, :, None], a[:, None, :], out=block.view(n, *p.shape))
        offset += p.numel()
    return g, losses
