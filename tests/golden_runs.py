"""The golden runs: short runs whose R and final weights under ``trainer.numerics=portable`` are
committed as exact values (``tests/golden/portable.json``) and must come out bit for bit on any
x86-64 CPU (``tests/core/test_golden.py``; docs/notes/NUMERICS.md).

    python -m tests.golden_runs            # this machine's values, as JSON on stdout
    python -m tests.golden_runs --write    # replace tests/golden/portable.json (`make golden`)

The runs cover each kind of arithmetic a run does on the CPU: an MLP with AdaER's virtual step,
scores and evictions (split-MNIST-like shapes, overlapping classes so that R is not all 100%),
GEM's float64 QP products, and the reduced ResNet-18's convolutions and BatchNorm. Each is seeded,
one thread; the weights' digest is the sha256 of the network's parameters and buffers, in name
order. Rewrite the file only after a change meant to move the numbers, and say so in the commit.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import sys
import tempfile
from pathlib import Path

GOLDEN = Path(__file__).resolve().parent / "golden" / "portable.json"
COMMON = ["benchmark.synthetic.noise=1.0", "trainer.numerics=portable", "keep_weights=true"]
RUNS = {
    "adaer_mlp": ["method=adaer", "seed=1"],
    "gem_mlp": ["method=gem", "seed=2"],
    "er_resnet18": [
        "method=er",
        "seed=3",
        "benchmark.backbone=resnet18",
        "benchmark.synthetic.shape=[3,32,32]",
        "benchmark.synthetic.train_per_class=20",
        "benchmark.train_per_class=20",
        "benchmark.synthetic.test_per_class=10",
    ],
}


def weights_digest(ckpt: Path) -> str:
    import torch

    state = torch.load(ckpt, map_location="cpu", weights_only=False)["state_dict"]
    h = hashlib.sha256()
    for name in sorted(k for k in state if k.startswith("net.")):
        h.update(name.encode() + state[name].detach().contiguous().numpy().tobytes())
    return h.hexdigest()


def measure() -> dict:
    """Every golden run in this process (pinned to portable kernels first)."""
    from clsuite.config.numerics import apply, check

    apply("portable")  # before this process's first torch computation
    from clsuite.run.experiment import run_experiment
    from clsuite.run.record import cpu_model
    from tests.conftest import make_cfg

    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, overrides in RUNS.items():
            res = run_experiment(make_cfg(*COMMON, *overrides), Path(tmp) / name)
            check("portable", res["identity"]["env"]["numerics"])
            out[name] = {
                "overrides": [*COMMON, *overrides],
                "R": res["R"],
                "weights_sha256": weights_digest(Path(tmp) / name / "model.ckpt"),
            }
    return {"made_on": {"cpu": cpu_model(), "date": dt.date.today().isoformat()}, "runs": out}


if __name__ == "__main__":
    found = measure()
    if "--write" in sys.argv[1:]:
        GOLDEN.write_text(json.dumps(found, indent=1) + "\n")
        print(f"wrote {GOLDEN}", file=sys.stderr)
    else:
        print(json.dumps(found))
