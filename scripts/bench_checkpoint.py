"""`make bench` (after scripts/bench.py): what one task-end checkpoint costs (clsuite.checkpoint).

For each benchmark and reading (memory=100, the config's default; mir_code counts M per class,
paper_text in total):

1. the run is built as ``run_experiment`` builds it (data module, network, memory, method,
   Trainer with its callbacks) and trained on a few batches of task 1, so that the optimizer,
   the fit loop and the plugin hold state;
2. the memory is filled to its capacity with samples of the benchmark's shape (a checkpoint's
   size is set by the memory and the network, not by how far the stream has gone);
3. ``--repeats`` checkpoints are written through the store (``torch.save`` + sha256 + fsync +
   rename): median seconds and the file's bytes; then the newest is found, verified and restored
   into a freshly built run (seconds).

split-MNIST reads the real files (``DATA_DIR``); split-CIFAR100 uses synthetic data of the real
shape (3x32x32, 100 classes, 50 tasks, the reduced ResNet-18), since CIFAR is not on this machine.
Printed as a Markdown table (docs/CHECKPOINTS.md quotes it).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "src"), str(ROOT)]

import torch  # noqa: E402
from hydra import compose, initialize_config_dir  # noqa: E402

from clsuite import checkpoint as ck  # noqa: E402
from clsuite.callbacks import AccuracyMatrix, DivergenceGuard, MemoryUpdate  # noqa: E402
from clsuite.experiment import build, make_trainer  # noqa: E402
from clsuite.identity import identity  # noqa: E402

CIFAR_SYNTHETIC = "+benchmark.synthetic={num_classes:100,shape:[3,32,32],train_per_class:4,test_per_class:2,seed:0}"
CASES = {  # name: overrides
    "split-MNIST (MLP)": ["benchmark=split_mnist", "benchmark.train_per_class=20"],
    "split-CIFAR100 (reduced ResNet-18, synthetic)": [
        "benchmark=split_cifar100",
        "benchmark.source=synthetic",
        CIFAR_SYNTHETIC,
        "benchmark.train_per_class=4",
    ],
}


def cfg(*overrides):
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        return compose("config", overrides=["logger=none", "trainer=cpu", "trainer.progress_bar=false", *overrides])


def built(c):
    """A run after part of task 1, its memory full: (learner, trainer, callbacks)."""
    dm, learner, device = build(c)
    callbacks = [DivergenceGuard(), MemoryUpdate(), AccuracyMatrix(dm), ck.TaskCheckpoint("bench")]
    trainer = make_trainer(c, device, callbacks, None)
    dm.set_task(0)
    learner.start_task(0)
    trainer.fit_loop.max_epochs = 1
    trainer.fit(learner, datamodule=dm)
    mem = learner.memory
    g = torch.Generator().manual_seed(0)
    n = mem.capacity - mem.size
    mem.append(torch.rand(n, *mem.x.shape[1:], generator=g), torch.randint(mem.num_classes, (n,), generator=g),
               torch.zeros(n, dtype=torch.long))  # fmt: skip
    return learner, trainer, callbacks


def measure(c, repeats: int) -> dict:
    learner, trainer, _ = built(c)
    with tempfile.TemporaryDirectory() as d:
        store = ck.CheckpointStore(d, "bench")
        times = []
        for i in range(repeats):
            t = time.perf_counter()
            path = store.save(trainer, i + 1)
            times.append(time.perf_counter() - t)
        size = path.stat().st_size
        fresh, trainer2, callbacks2 = built(c)
        t = time.perf_counter()
        found = store.latest(map_location="cpu")
        ck.restore(found[1], trainer2, fresh, callbacks2)
        load_s = time.perf_counter() - t
    params = sum(p.numel() for p in learner.net.parameters())
    return {"save_s": statistics.median(times), "load_s": load_s, "bytes": size, "M": learner.memory.capacity,
            "params": params}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--method", default="adaer")
    args = ap.parse_args()
    print(f"\n## Checkpoint cost ({args.method}, memory=100, CPU, median of {args.repeats} writes)\n")
    print("| benchmark | reading | M (slots) | parameters | MB per checkpoint | s per write | s to resume |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for name, overrides in CASES.items():
        for reading in ("mir_code", "paper_text"):
            c = cfg(f"method={args.method}", f"reading={reading}", *overrides)
            identity(c, "cpu")  # (the data files' digests: outside the timings)
            r = measure(c, args.repeats)
            print(
                f"| {name} | {reading} | {r['M']} | {r['params']:,} | {r['bytes'] / 1e6:.1f} | "
                f"{r['save_s']:.3f} | {r['load_s']:.3f} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
