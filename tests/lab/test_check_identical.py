"""scripts/check_identical.py (the bit-identity check of a change): ``compare`` calls two files identical
only when every R is equal as floats, names the method that differs, and refuses two files of different
settings (``--benchmark``, ``--set``) instead of comparing them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "check_identical.py"


def _file(path: Path, R: dict, benchmark: str = "split_cifar10_jpeg", extra=("benchmark.train_per_class=110",)):
    path.write_text(json.dumps({"root": "x", "benchmark": benchmark, "set": list(extra), "R": R}))
    return path


def _compare(a: Path, b: Path):
    return subprocess.run([sys.executable, str(SCRIPT), "compare", str(a), str(b)], capture_output=True, text=True)


def test_identical_differs_and_different_settings(tmp_path):
    R = {"er/0": [[1.0, 2.0], [3.0, 4.0]], "mir/0": [[1.0, 2.0], [3.0, 4.5]]}
    a = _file(tmp_path / "a.json", R)
    p = _compare(a, _file(tmp_path / "b.json", R))
    assert p.returncode == 0 and p.stdout.split() == [
        "method",
        "seeds",
        "result",
        "er",
        "1",
        "identical",
        "mir",
        "1",
        "identical",
    ]
    moved = {**R, "mir/0": [[1.0, 2.0], [3.0, 4.5 + 1e-12]]}  # the last bits of one cell
    p = _compare(a, _file(tmp_path / "c.json", moved))
    assert p.returncode == 1 and "mir" in p.stdout and "DIFFERS" in p.stdout and p.stdout.count("identical") == 1
    p = _compare(a, _file(tmp_path / "d.json", R, extra=("benchmark.train_per_class=20",)))
    assert p.returncode == 2 and "different settings" in p.stdout
    p = _compare(a, _file(tmp_path / "e.json", R, benchmark="split_mnist"))
    assert p.returncode == 2 and "different settings" in p.stdout
