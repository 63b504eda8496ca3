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
