"""Synthetic results files for the analysis tests: the layout ``src/run.py`` writes, made-up numbers.

Nothing here is a result of the suite. ``plausible_R`` draws an accuracy matrix of a class-IL
stream (a task is learned to ~95%, then decays towards a method-dependent level; tasks not yet
seen are at 0); ``write_run`` writes one sealed ``results.json`` with the fields the analysis reads
(metrics, R, b, config, reading, identity, device, versions), which ``clsuite.run.results.read_run``
accepts; ``edit_run`` changes one and seals it again; ``paper_suite`` fills
``multirun/`` with every paper experiment on two benchmarks, used to draw the figures in tests.

    .venv/bin/python -m tests.results_fixtures /tmp/fake_multirun     # then: python src/run.py report --multirun-dir ...
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

from clsuite.core.metrics import all_metrics
from clsuite.run.identity import canonical, normalize, seal, sha256

CODE_HASH = "0123456789abcdef"  # the made-up code of the made-up runs

# A made-up retention level per method (0 = forgets everything, 1 = keeps what it learned).
RETENTION = {
    "online": 0.0, "oewc": 0.0, "si": 0.0, "agem": 0.15, "icarl": 0.7, "hal": 0.62, "gss": 0.62, "gem": 0.7,
    "er": 0.66, "mir": 0.7, "ccmr": 0.72, "ebrs": 0.73, "adaer": 0.76,
}  # fmt: skip


def fake_R(T: int, final: float, first_final: float | None = None) -> np.ndarray:
    """A T x T matrix whose last row averages ``final`` (its first column ends at ``first_final``)."""
    R = np.zeros((T, T))
    for i in range(T):
        R[i, : i + 1] = 90.0
    R[-1] = final
    if first_final is not None:
        R[-1, 0] = first_final
        R[-1, 1:] = (final * T - first_final) / (T - 1)
    return R


def plausible_R(T: int, retention: float, seed: int, noise: float = 2.0, salt: int = 0) -> np.ndarray:
    """Class-IL accuracy matrix: R[i, j] = 0 for j > i, ~95 at j = i, decaying with i - j to ``retention``."""
    shared = np.random.default_rng(seed)  # the seed's split and initialisation: shared by every method
    own = np.random.default_rng(1000 * seed + salt)
    hard = shared.normal(0, 3, T)
    R = np.zeros((T, T))
    for i in range(T):
        for j in range(i + 1):
            keep = 1.0 if i == j else retention + (1 - retention) * np.exp(-1.5 * (i - j))
            R[i, j] = (95.0 - abs(hard[j])) * keep + own.normal(0, noise)
    return np.clip(R, 0, 100)


def write_run(
    root: Path,
    benchmark="split_mnist",
    method="er",
    seed=0,
    memory=100,
    tau=0.5,
    lam=0.0,
    R=None,
    reading: str | None = "paper_text",
    extra_cfg=None,
    job=None,
    identity=True,
    device="cpu",
    code_hash=CODE_HASH,
    commit="abc1234" + "0" * 33,
    cpu: str | None = None,
) -> Path:
    """One finished run's ``results.json`` under ``root/<job>/``; returns its folder."""
    R = fake_R(5, 80.0) if R is None else np.asarray(R, dtype=float)
    b = np.full(R.shape[1], 10.0)
    cfg = {
        "experiment": root.name,
        "seed": seed,
        "memory": memory,
        "tau": tau,
        "lambda": lam,
        "lr": 0.1,
        "benchmark": {"name": benchmark, "n_tasks": R.shape[1], "source": "MNIST"},
        "method": {"name": method, **({"joint": True} if R.shape[0] == 1 else {})},
        "logger": {"name": "csv"},
        "trainer": {"accelerator": "cpu", "progress_bar": False, "threads": 1},
        **({"reading": reading} if reading else {}),
        **(extra_cfg or {}),
    }
    res = {
        "status": "finished",
        "benchmark": benchmark,
        "method": method,
        "memory": memory,
        "seed": seed,
        "R": R.tolist(),
        "b": b.tolist(),
        "metrics": all_metrics(R, b),
        "config": cfg,
        "wall_time_s": 2.0,
        "device": device,
        "versions": {
            "python": "3.11.2",
            "torch": "2.13.0",
            "platform": "Linux-test-x86_64",
            **({"cpu": cpu} if cpu else {}),
        },
    }
    if reading:
        res["reading"] = reading
    if identity:
        res["identity"] = {
            "config": normalize(cfg),
            "code": {"hash": code_hash},
            "data": {"files": {"MNIST/raw/train-images-idx3-ubyte.gz": "f68b3c2dcbeaaa9fbdd348bbdeb94873"}},
            "env": {"torch_threads": 1, "blas_threads": 1, "device_type": device.split(":")[0], "torch": "2.13.0"},
            "provenance": {"commit": commit, "dirty": False, "version": None},
        }
    name = job or ",".join(
        [f"benchmark={benchmark}", f"lambda={lam}", f"memory={memory}", f"method={method}"]
        + ([f"reading={reading}"] if reading else [])
        + [f"seed={seed}", f"tau={tau}"]
    )
    d = root / name
    d.mkdir(parents=True, exist_ok=True)
    (d / "results.json").write_text(json.dumps(reseal(res)))
    return d


def reseal(res: dict) -> dict:
    """The results as a run would write them: the identity's key from its parts, then the seal."""
    ident = res.get("identity")
    if isinstance(ident, dict) and all(k in ident for k in ("config", "code", "data", "env")):
        ident["key"] = sha256(canonical({k: ident[k] for k in ("config", "code", "data", "env")}))
    res.pop("digest", None)
    return seal(res)


def edit_run(d: Path, edit) -> Path:
    """Change a written run (``edit(res)`` in place) and seal it again, as if a run had written it."""
    path = Path(d) / "results.json"
    res = json.loads(path.read_text())
    edit(res)
    path.write_text(json.dumps(reseal(res)))
    return Path(d)


def write_grid(root: Path, dirs: list[str]) -> None:
    (root / "grid.json").write_text(
        json.dumps({"created": "now", "argv": [], "jobs": [{"overrides": [], "dir": d} for d in dirs]})
    )


BENCHES = {"split_mnist": 0.0, "split_fmnist": -12.0}  # made-up offset of the harder benchmark


def _R(bench: str, method: str, seed: int, T: int = 5, shift: float = 0.0) -> np.ndarray:
    ret = min(1.0, max(0.0, RETENTION.get(method, 0.5) + shift))
    salt = sum(map(ord, method + bench))
    R = plausible_R(T, ret, seed, salt=salt)
    R[np.tril_indices(T)] += BENCHES.get(bench, 0.0)
    return np.clip(R, 0, 100)


def paper_suite(multirun: Path, seeds=range(5), readings=("paper_text", "mir_code"), benches=tuple(BENCHES)) -> Path:
    """Every paper experiment on split-MNIST and split-FMNIST, made-up numbers (see the module docstring)."""
    multirun = Path(multirun)
    methods = ["online", "joint", "oewc", "si", "er", "gem", "agem", "icarl", "hal", "gss", "mir", "ccmr", "ebrs"]
    for s in seeds:
        for b in benches:
            for r in readings:
                bonus = 0.04 if r == "mir_code" else 0.0
                for m in [*methods, "adaer"]:
                    R = _R(b, m, s, shift=bonus) if m != "joint" else _R(b, "adaer", s, shift=0.3)[-1:]
                    write_run(multirun / "table2", b, m, s, R=R, reading=r)
            for m in ["er", "gem", "agem", "icarl", "hal", "gss", "mir", "ccmr", "ebrs", "adaer"]:
                for M in (50, 100, 200):
                    R = _R(b, m, s, shift=(M - 100) / 1000 * (0.3 if m == "adaer" else 1.0))
                    exp = "ablation" if m in ("ccmr", "ebrs") else "memory"
                    write_run(multirun / exp, b, m, s, memory=M, R=R)
                    if m in ("er", "mir", "adaer"):
                        write_run(multirun / "ablation", b, m, s, memory=M, R=R)
            for m in ["online", "oewc", "si", "er", "gem", "agem", "icarl", "hal", "gss", "mir", "adaer", "joint"]:
                R = _R(b, m, s) if m != "joint" else _R(b, "adaer", s, shift=0.3)[-1:]
                write_run(multirun / "first_task", b, m, s, R=R)
            for tau in (0.1, 0.3, 0.5, 0.7, 0.9):
                write_run(multirun / "tau", b, "adaer", s, tau=tau, R=_R(b, "adaer", s, shift=-abs(tau - 0.5) / 4))
        for m in ["er", "mir", "adaer"]:
            for lam in (0.0, 0.1, 0.3, 0.5, 0.7, 0.9):
                shift = -lam * lam * (0.3 if m == "adaer" else 0.5)
                write_run(
                    multirun / "imbalance", "split_fmnist", m, s, lam=lam, R=_R("split_fmnist", m, s, shift=shift)
                )
    return multirun


def parity_record(
    acc: dict[tuple[str, str], dict[int, tuple[float, float]]],
    commit: str | None = None,
    code: str = CODE_HASH,
    complete: bool = True,
) -> dict:
    """A made-up parity record (scripts/parity/harness.py's form): ``acc`` ``{(method, benchmark): {seed:
    (the suite's Acc, Mammoth's)}}``, each side's R the made-up matrix whose last row averages its Acc."""
    side = lambda a: {"R": fake_R(5, a).tolist(), "acc": float(fake_R(5, a)[-1].mean())}  # noqa: E731
    rows = [{"method": m, "benchmark": b, "reading": "mir_code", "suite_overrides": ["trainer.numerics=portable"],
             "settings": {"memory_slots": 1000, "batch_size": 10, "replay_size": 10, "lr": 0.1, "mammoth_args": {}},
             "seeds": [{"seed": s, "suite": side(a), "mammoth": side(r)} for s, (a, r) in seeds.items()]}
            for (m, b), seeds in acc.items()]  # fmt: skip
    prov = {"date": "2026-11-28", "suite_commit": commit, "suite_dirty": False, "suite_code": code,
            "numerics": {"mode": "portable", "aten": "DEFAULT", "mkl": "COMPATIBLE", "mkldnn": False, "nnpack": False},
            "mammoth_commit": "e75a491", "mammoth_flipped_means": True, "torch": "2.13.0", "torch_threads": 1,
            "cpu": "Test CPU @ 1.00GHz", "platform": "Linux-test-x86_64"}  # fmt: skip
    return {"provenance": prov, "complete": complete, "rows": rows}


if __name__ == "__main__":
    print(paper_suite(Path(sys.argv[1] if len(sys.argv) > 1 else "/tmp/fake_multirun")))
