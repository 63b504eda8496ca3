"""On a GPU the stream, the memory and the model all live on the device (skipped without CUDA)."""

from __future__ import annotations

import pytest
import torch

from clsuite.experiment import build, run_experiment
from tests.conftest import make_cfg

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]


def test_everything_on_the_gpu(tmp_path):
    cfg = make_cfg("trainer=gpu", "method=adaer")
    dm, learner, device = build(cfg)
    assert device.type == "cuda"
    assert all(p.is_cuda for p in learner.net.parameters())
    assert learner.memory.x.is_cuda and learner.memory.score.is_cuda
    x, y, t = next(iter(dm.train_dataloader()))
    assert x.is_cuda and y.is_cuda and t.is_cuda  # batches are slices of device tensors: no host copies
    res = run_experiment(cfg, tmp_path)
    assert res["device"].startswith("cuda") and res["metrics"]["acc"] > 30
