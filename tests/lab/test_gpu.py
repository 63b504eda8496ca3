"""On a GPU: the stream, the memory and the model live on the device (also between the fits,
after which Lightning moves the module to the CPU), an incoming batch makes no host-device
synchronisation (so no copy) in ER and MIR and a bounded few in AdaER, the GPU computes what the
CPU computes, and a joblib sweep runs each job on the GPU. Skipped without CUDA; `scripts/gpu_check.sh`
runs them on a GPU machine and fails if any is skipped."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import traceback
import warnings
from pathlib import Path

import lightning as L
import numpy as np
import pytest
import torch

from clsuite.core.callbacks import MemoryUpdate, evaluate
from clsuite.core.train import build
from clsuite.run.experiment import run_experiment
from tests.conftest import make_cfg

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]

ROOT = Path(__file__).resolve().parents[2]


def trainer_for(device, callbacks) -> L.Trainer:
    return L.Trainer(
        accelerator="gpu" if device.type == "cuda" else "cpu",
        devices=[device.index or 0] if device.type == "cuda" else 1,
        max_epochs=0,
        logger=False,
        callbacks=callbacks,
        enable_checkpointing=False,
        enable_model_summary=False,
        enable_progress_bar=False,
        num_sanity_val_steps=0,
        limit_val_batches=0,
    )


def fit_task(trainer, learner, dm, task: int, limit=None) -> None:
    dm.set_task(task)
    learner.start_task(task)
    trainer.fit_loop.max_epochs = trainer.current_epoch + 1  # one more pass: the next task (as run_experiment)
    trainer.limit_train_batches = 1.0 if limit is None else limit
    trainer.fit(learner, datamodule=dm)


def test_everything_on_the_gpu(tmp_path):
    cfg = make_cfg("trainer=gpu", "method=adaer")
    dm, learner, device = build(cfg)
    assert device.type == "cuda"
    assert all(p.is_cuda for p in learner.net.parameters())
    assert all(b.is_cuda for b in learner.net.buffers())
    mem = learner.memory
    assert all(getattr(mem, k).is_cuda for k in ("x", "y", "t", "score", "logits"))
    for k in range(dm.n_tasks):
        for split in ("train", "test"):
            assert all(v.is_cuda for v in dm.split(k, split))
    assert learner.task_classes.is_cuda
    x, y, t = next(iter(dm.train_dataloader()))
    assert x.is_cuda and y.is_cuda and t.is_cuda  # batches are slices of device tensors: no host copies
    res = run_experiment(cfg, tmp_path)
    assert res["device"].startswith("cuda") and res["metrics"]["acc"] > 30


def test_momentum_state_follows_the_model_between_tasks(tmp_path):
    """Lightning moves the module and the optimizer state to the CPU after every fit (one per
    task) and back at the next: SGD momentum buffers and the evaluations must still work."""
    res = run_experiment(make_cfg("trainer=gpu", "method=er", "momentum=0.9", "lr=0.05"), tmp_path)
    assert res["device"].startswith("cuda") and res["metrics"]["acc"] > 30


class SyncCounter(L.Callback):
    """Counts, per incoming batch, the host-device synchronisations (``set_sync_debug_mode``:
    every ``.item()``, ``.tolist()``, boolean-mask index, blocking copy) made from the suite's
    code, from ``on_train_batch_start`` to the end of the memory update (the callback after it)."""

    def __init__(self):
        self.per_batch: list[int] = []
        self.sites: dict[str, int] = {}

    def _show(self, message, category, filename, lineno, file=None, line=None):
        frames = [f for f in traceback.extract_stack()[:-1] if "/clsuite/" in f.filename]
        if frames:
            self.per_batch[-1] += 1
            f = frames[-1]
            key = f"{f.filename.split('/clsuite/')[-1]}:{f.lineno} {(f.line or '').strip()}"
            self.sites[key] = self.sites.get(key, 0) + 1

    def on_train_batch_start(self, trainer, learner, batch, batch_idx):
        self.per_batch.append(0)
        self._saved = (warnings.showwarning, warnings.filters[:])
        warnings.simplefilter("always")
        warnings.showwarning = self._show
        torch.cuda.set_sync_debug_mode("warn")

    def on_train_batch_end(self, trainer, learner, outputs, batch, batch_idx):
        torch.cuda.set_sync_debug_mode("default")
        warnings.showwarning, warnings.filters[:] = self._saved


def test_the_sync_counter_sees_a_sync():
    """Positive control for the two tests below: a bincount on the GPU (it reads its maximum back)."""
    from clsuite.core.memory.buffer import Memory

    mem = Memory(4, (1,), 3, device="cuda")
    mem.append(
        torch.zeros(2, 1, device="cuda"),
        torch.tensor([0, 2], device="cuda"),
        torch.zeros(2, dtype=torch.long, device="cuda"),
    )
    counter = SyncCounter()
    counter.on_train_batch_start(None, None, None, 0)
    mem.class_counts()
    counter.on_train_batch_end(None, None, None, None, 0)
    assert counter.per_batch[0] >= 1 and all(k.startswith("memory/buffer.py") for k in counter.sites), counter.sites


@pytest.mark.parametrize("method", ["er", "mir"])
def test_an_incoming_batch_makes_no_host_sync(method):
    """Replay selection, the update on R + B_t and the reservoir update, once memory is full
    (M = 100: after 5 batches of 20), stay on the device: not one synchronisation per batch."""
    dm, learner, device = build(make_cfg("trainer=gpu", f"method={method}"))
    counter = SyncCounter()
    trainer = trainer_for(device, [MemoryUpdate(), counter])  # counter last: its end hook closes the window
    fit_task(trainer, learner, dm, 0)
    assert learner.memory.full
    counter.per_batch.clear()
    counter.sites.clear()
    fit_task(trainer, learner, dm, 1)
    assert len(counter.per_batch) == 10
    assert sum(counter.per_batch) == 0, counter.sites


def test_adaer_syncs_are_bounded():
    """AdaER keeps a few syncs: C-CMR's quotas (the task count, Eq. 5's leftover, the per-task
    draw: at most 4 per iteration) and E-BRS's one-by-one placement, which runs on a host copy
    (at most 3 per batch, whatever the number of accepted samples); none anywhere else."""
    dm, learner, device = build(make_cfg("trainer=gpu", "method=adaer"))
    counter = SyncCounter()
    trainer = trainer_for(device, [MemoryUpdate(), counter])
    fit_task(trainer, learner, dm, 0)
    counter.per_batch.clear()
    counter.sites.clear()
    fit_task(trainer, learner, dm, 1)  # N = 200..400 seen, M = 100: most batches accept samples
    n = len(counter.per_batch)
    by_file: dict[str, int] = {}
    for site, k in counter.sites.items():
        f = site.split(":")[0]
        by_file[f] = by_file.get(f, 0) + k
    assert by_file.get("memory/ebrs.py", 0) <= 3 * n, counter.sites
    assert by_file.get("replay/ccmr.py", 0) <= 4 * n * learner.iters_per_batch, counter.sites
    assert set(by_file) <= {"memory/ebrs.py", "replay/ccmr.py"}, counter.sites


def _score_on(device, cfg_args, x, y, t):
    from clsuite.core.replay.virtual import score_slots

    dm, learner, _ = build(make_cfg(f"trainer={'gpu' if device == 'cuda' else 'cpu'}", *cfg_args))
    mx, my, mt = dm.split(0, "train")
    learner.memory.append(mx[:60], my[:60], mt[:60])
    learner.memory.append(*(v[:40] for v in dm.split(1, "train")))
    learner.train()
    s = score_slots(
        learner,
        x.to(learner.device),
        y.to(learner.device),
        t.to(learner.device),
        torch.arange(100, device=learner.device),
    )
    return learner, s


@pytest.fixture
def no_tf32():
    """cuDNN convolutions use TF32 by default (about 1e-3 relative error); scores are differences
    of two losses, so compare them in plain float32."""
    old = torch.backends.cudnn.allow_tf32
    torch.backends.cudnn.allow_tf32 = False
    yield
    torch.backends.cudnn.allow_tf32 = old


def test_cpu_and_gpu_compute_the_same_scores_and_replay(no_tf32):
    """The virtual step (Eq. 3) and the interference scores (Eq. 4) on the reduced ResNet-18 with
    BatchNorm: the same numbers on the GPU as on the CPU (float32, rel. 1e-3), and C-CMR with
    tau = 1 (no random part) replays the same slots; the BatchNorm buffers stay untouched."""
    args = ("method=adaer", "tau=1.0", "model=resnet18", "benchmark.synthetic.shape=[3,32,32]")
    dm, _, _ = build(make_cfg("trainer=cpu", *args))
    x, y, t = (v[:20] for v in dm.split(1, "train"))
    cpu, s_cpu = _score_on("cpu", args, x, y, t)
    gpu, s_gpu = _score_on("cuda", args, x, y, t)
    for (k, a), b in zip(cpu.net.state_dict().items(), gpu.net.state_dict().values(), strict=True):
        assert torch.equal(a, b.cpu()), k  # same init, buffers untouched by the scoring passes
    s_gpu = s_gpu.cpu()
    assert s_cpu.abs().max() > 0
    assert torch.allclose(s_gpu, s_cpu, rtol=1e-3, atol=1e-3 * float(s_cpu.abs().max()))
    # C-CMR, tau = 1: R = the 20 most interfered slots; compare as sets away from near-ties
    order = s_cpu.argsort(descending=True)
    gap = float(s_cpu[order[19]] - s_cpu[order[20]])
    r_cpu = cpu.replay.select(cpu, x, y, t, 20)
    r_gpu = gpu.replay.select(gpu, x.cuda(), y.cuda(), t.cuda(), 20)
    if gap > 1e-3 * float(s_cpu.abs().max()):
        assert set(r_cpu.tolist()) == set(r_gpu.cpu().tolist())


def test_cpu_and_gpu_give_the_same_accuracies():
    """Online SGD on the synthetic stream (no random replay draws, which come from the device's
    own generator): the same R on the GPU as on the CPU, up to one test sample per entry."""
    res = {}
    for dev in ("cpu", "gpu"):
        cfg = make_cfg(f"trainer={dev}", "method=online")
        dm, learner, device = build(cfg)
        trainer = trainer_for(device, [])
        rows = []
        for k in range(dm.n_tasks):
            fit_task(trainer, learner, dm, k)
            rows.append(evaluate(learner, dm, "test")[0])
        res[dev] = (np.asarray(rows), {n: p.detach().cpu() for n, p in learner.net.named_parameters()})
    (r_cpu, p_cpu), (r_gpu, p_gpu) = res["cpu"], res["gpu"]
    n_test = len(dm.split(0, "test")[1])
    assert np.abs(r_cpu - r_gpu).max() <= 100.0 / n_test + 1e-9, (r_cpu, r_gpu)
    for n in p_cpu:
        assert torch.allclose(p_cpu[n], p_gpu[n], rtol=1e-3, atol=1e-4), n


def test_joblib_sweep_runs_each_job_on_the_gpu(tmp_path):
    """launcher=joblib: each job takes the GPU from the lock-file pool and runs on it."""
    env = {
        **os.environ,
        "TMPDIR": str(tmp_path),  # the GPU slots' lock files (clsuite.sweep.gpus.GPU_LOCK_DIR)
        "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    cmd = [
        sys.executable,
        str(ROOT / "src" / "run.py"),
        "-m",
        "launcher=joblib",
        "method=er,online",
        "benchmark=synthetic",
        "logger=none",
        "trainer.progress_bar=false",
        f"hydra.sweep.dir={tmp_path}/mr",
    ]
    p = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    results = sorted((tmp_path / "mr").rglob("results.json"))
    assert len(results) == 2, p.stderr[-2000:]
    for f in results:
        assert json.loads(f.read_text())["device"] == "cuda:0", f
