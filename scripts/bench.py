"""`make bench`: speed measured side by side in one process.

1. Suite overhead: an ER split-MNIST run through the suite (Hydra config,
   Lightning Trainer, callbacks) against a bare PyTorch loop doing the same
   forward/backward steps, memory updates and evaluations on the same tensors.
   Interpreter start-up and data loading are excluded from both.
2. Method cost: time per incoming batch of MIR and AdaER relative to ER, next to
   the ratio of their forward/backward work (samples through the network,
   a backward pass counted as two forwards).

Runs alternate (suite, bare, suite, bare, ...) and the medians are reported,
since these machines are noisy.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "src"), str(ROOT)]

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from hydra import compose, initialize_config_dir  # noqa: E402
from omegaconf import OmegaConf  # noqa: E402

from clsuite.data.datamodule import ContinualDataModule  # noqa: E402
from clsuite.experiment import run_experiment  # noqa: E402
from clsuite.models.nets import build_model  # noqa: E402


def cfg(*overrides):
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        return compose("config", overrides=["logger=none", "trainer.progress_bar=false", *overrides])


def bare_er(c, seed: int, M: int = 100, bs: int = 20, lr: float = 0.1):
    """ER in plain PyTorch: same data split, model, stream, replay, reservoir
    (vectorised the same way) and evaluations; no config, Trainer or callbacks."""
    dm = ContinualDataModule(
        OmegaConf.to_container(c.benchmark, resolve=True),
        {**OmegaConf.to_container(c.data, resolve=True), "imbalance": 0.0},
        seed=seed,
    ).prepare()
    torch.manual_seed(seed)
    net = build_model("mlp", dm.input_shape, dm.num_classes)
    opt = torch.optim.SGD(net.parameters(), lr=lr)
    mx = torch.zeros(M, *dm.input_shape)
    my = torch.zeros(M, dtype=torch.long)
    n_mem, seen = 0, 0
    gen = torch.Generator().manual_seed(seed)

    @torch.no_grad()
    def evaluate():
        net.eval()
        row = []
        for k in range(dm.n_tasks):
            x, y, _ = dm.split(k, "test")
            row.append(100.0 * (net(x).argmax(1) == y).float().mean().item())
        net.train()
        return row

    rows = [evaluate()]  # b
    for k in range(dm.n_tasks):
        x_all, y_all, _ = dm.split(k, "train")
        perm = torch.randperm(len(y_all), generator=gen)
        for i in range(0, len(y_all), bs):
            idx = perm[i : i + bs]
            x, y = x_all[idx], y_all[idx]
            if n_mem:
                r = torch.randperm(n_mem)[:bs]
                xx, yy = torch.cat([x, mx[r]]), torch.cat([y, my[r]])
            else:
                xx, yy = x, y
            opt.zero_grad()
            F.cross_entropy(net(xx), yy).backward()
            opt.step()
            if n_mem < M:  # reservoir: fill, then replace slot j ~ U[0, seen) when j < M
                mx[n_mem : n_mem + len(y)], my[n_mem : n_mem + len(y)] = x, y
                n_mem += len(y)
            else:
                j = (torch.rand(len(y), dtype=torch.float64) * torch.arange(seen + 1, seen + len(y) + 1)).long()
                keep = j < M
                mx[j[keep]], my[j[keep]] = x[keep], y[keep]
            seen += len(y)
        rows.append(evaluate())
    return rows


def suite_run(method: str, benchmark: str, seed: int):
    c = cfg(f"method={method}", f"benchmark={benchmark}", f"seed={seed}")
    t0 = time.perf_counter()
    res = run_experiment(c, "/tmp/clsuite_bench")
    return time.perf_counter() - t0, res


def work_units(method: str, M: int, bs: int = 20, R: int = 20, C: int = 50) -> float:
    """Samples through the network per incoming batch once memory is full (bwd = 2 fwd)."""
    real = 3 * (bs + R)  # forward + backward on B_t + R
    if method == "er":
        return real
    scored = C if method == "mir" else M  # C-CMR scores all of M by default
    return real + 3 * bs + 2 * scored  # virtual step on B_t + two scoring passes


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--benchmark", default="split_mnist")
    args = ap.parse_args()
    torch.set_num_threads(1)
    c = cfg(f"benchmark={args.benchmark}")
    suite_t, bare_t = [], []
    for r in range(args.repeats):
        t, _ = suite_run("er", args.benchmark, r)
        suite_t.append(t)
        t0 = time.perf_counter()
        bare_er(c, r)
        bare_t.append(time.perf_counter() - t0)
    s, b = statistics.median(suite_t), statistics.median(bare_t)
    print(f"== 1. suite overhead: ER on {args.benchmark}, M=100, {args.repeats} alternating repeats, 1 thread")
    print(f"suite run (data + Lightning Trainer + callbacks + results file): {s:.2f} s (median)")
    print(f"bare PyTorch loop (same data, steps, memory updates, evaluations): {b:.2f} s (median)")
    print(f"ratio suite / bare: {s / b:.2f}")

    print(f"\n== 2. method cost per incoming batch ({args.benchmark}, M=100, {args.repeats} alternating repeats)")
    per_batch = {m: [] for m in ("er", "mir", "adaer")}
    for r in range(args.repeats):
        for m in per_batch:
            _, res = suite_run(m, args.benchmark, r)
            per_batch[m].append(res["train_time_s"] / sum(res["steps_per_task"]))
    er = statistics.median(per_batch["er"])
    print(f"{'method':8s} {'ms/batch':>9s} {'time vs ER':>11s} {'fwd/bwd work vs ER':>19s}")
    for m, v in per_batch.items():
        t = statistics.median(v)
        print(f"{m:8s} {1e3 * t:9.2f} {t / er:11.2f} {work_units(m, 100) / work_units('er', 100):19.2f}")


if __name__ == "__main__":
    main()
