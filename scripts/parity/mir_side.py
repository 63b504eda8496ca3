"""The reference's side of a parity run with MIR's own code: ``er_main.py`` of a MIR checkout
(github.com/optimass/Maximally_Interfered_Retrieval, pinned at ``35eda78``), run in a child process on the
CIFAR-10 JPEG copy with its CIFAR-10 script line (Scripts/ER_experiments.sh l.9-10), and its accuracy
matrix R read from its own log (docs/notes/PARITY.md, "MIR's code: ER and MIR on CIFAR-10").

Nothing of MIR's is copied here: the child imports MIR's files from the checkout and runs them, with
these changes at run time, in memory (the checkout is never written; every source edit must match its
text exactly, the stated number of times, or the run stops: :data:`PATCHES`):

1. **torchvision** (stub module): ``data.py`` l.10 imports ``datasets, transforms`` from torchvision, whose
   wheels do not install beside the CPU torch here. ``datasets.CIFAR10(root, train=..., download=...)``
   becomes :class:`JPEGCifar10`: the JPEG copy's images as read by the suite's own image-folder reader
   (``clsuite.core.data.imagefolder``), in torchvision's layout (``.data`` uint8 [N, 32, 32, 3],
   ``.targets`` a list of ints), class by class in the reader's file order. MIR's own code then does the
   rest unchanged: its stable sort by label, the tasks {0,1}..{8,9}, ``make_valid_from_train(cut=0.95)``
   with its own torch RNG (seeded 0 before the data, as er_main.py does), ``(x / 255 - 0.5) * 2``.
   ``transforms`` is an empty stand-in (only miniImageNet uses it).
2. **data.py, the torch 1.x assert** (``assert '1.' in str(torch.__version__)[:2]``, l.126 and l.191):
   removed; torch here is 2.x.
3. **data.py, the class boundaries** (``((train_y + i) % 10).argmax()``, train and test, l.164/167 and
   l.240/243): on ties torch <= 1.6 returned the *last* maximal index on CPU, torch >= 1.7 the first
   (pytorch/pytorch#42004; #32343 shows 1.4's behaviour). MIR's ``[x + 1 for x in sorted(train_idx)]``
   is written for the last index (one past each class's end); with the first index every task would
   take one image of the next class and lose one of its own. The call becomes ``_last_argmax(...)``,
   torch 1.3's tie rule; the adapter checks that every task holds exactly its two classes.
4. **er_main.py, the run loop** (``for run in range(args.n_runs):``, l.123): runs only the requested seed
   (``for run in _PARITY_RUNS:`` with ``--n_runs seed + 1``), so that each seed is its own process
   (the harness writes the record after each). MIR seeds run ``r`` with ``np.random.seed(r)`` and
   ``torch.manual_seed(r)`` at the top of the loop, so run r alone is run r of a longer loop. Its
   closing "FINAL Results" summary then averages over the seeds not run (zeros): not read.

Not patches: the child runs with ``CUDA_VISIBLE_DEVICES=""`` (MIR's ``args.cuda`` is false: CPU, as the
suite's side), one torch thread and the suite's CPU kernels (``trainer.numerics``), in a scratch
folder (MIR writes ``Results/`` and its ``<dataset>_<time><n><suffix>.log`` into the working folder).

What is read: ``LOG[run]['test']['acc']`` (er_main.py l.211, ``logging_per_task``): after each task
its test accuracy on every task seen so far, ``[task_t, task]``, each the mean over test batches of 64
of the batch accuracy, rounded to 2 decimals (MIR's own rounding: 1 point of resolution per cell). R
(the suite's convention, % and ``R[i][j]`` = task j after training task i) is ``100 * LOG.T``. The
child writes that array to a file and the parent also reads the last ``test:`` matrix MIR printed
(l.217) before ``Run #r Final Results``: the two must agree.

Not bit-level: MIR's class split, validation cut and stream order come from its own RNG use, which
the suite's cannot equal; the comparison is distributional per cell (per-seed R, their mean).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import ClassVar

import mammoth_side  # (beside this file: the harness and a script run put this folder on sys.path)
import numpy as np

PINNED = "35eda78"  # github.com/optimass/Maximally_Interfered_Retrieval
HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]

# the suite's method -> MIR's Scripts/ER_experiments.sh line for CIFAR-10 (l.9: MIR, l.10: ER), less --n_runs
SCRIPT_LINES = {
    "mir": ["--method", "mir_replay", "--lr", "0.1", "--samples_per_task", "-1", "--dataset", "split_cifar10",
            "--subsample", "50", "--disc_iters", "1", "--mem_size", "100", "--suffix", "ER_MIR"],
    "er": ["--method", "rand_replay", "--lr", "0.1", "--samples_per_task", "-1", "--dataset", "split_cifar10",
           "--disc_iters", "1", "--mem_size", "100", "--suffix", "ER"],
}  # fmt: skip


@dataclass(frozen=True)
class Patch:
    file: str
    old: str
    new: str
    count: int
    why: str


PATCHES = (
    Patch("data.py", "assert '1.' in str(torch.__version__)[:2], 'Use Pytorch 1.x!'", "pass  # parity: torch 2.x", 2,
          "torch here is 2.x; MIR asserts 1.x (split MNIST and split CIFAR-10)"),
    Patch("data.py", "train_idx = [((train_y + i) % 10).argmax() for i in range(10)]",
          "train_idx = [_last_argmax((train_y + i) % 10) for i in range(10)]", 2,
          "class boundaries: torch <= 1.6 returned the last maximal index on ties, torch >= 1.7 the first "
          "(pytorch/pytorch#42004); MIR's `x + 1` needs the last"),
    Patch("data.py", "test_idx  = [((test_y + i) % 10).argmax() for i in range(10)]",
          "test_idx  = [_last_argmax((test_y + i) % 10) for i in range(10)]", 2,
          "the same for the test split"),
    Patch("er_main.py", "for run in range(args.n_runs):", "for run in _PARITY_RUNS:", 1,
          "one seed per process: only the requested run (MIR reseeds numpy and torch with the run's number)"),
)  # fmt: skip
STUBS = {
    "torchvision": "absent (its wheels fail beside the CPU torch): datasets.CIFAR10 = the JPEG copy through the "
    "suite's image-folder reader (torchvision's layout, class by class in file order); transforms empty",
}


def patches() -> list[dict]:
    """Every change made to MIR's code at run time (the record's provenance carries them)."""
    return [{"kind": "source", **asdict(p)} for p in PATCHES] + [
        {"kind": "stub", "module": m, "why": w} for m, w in STUBS.items()
    ]


checkout_commit = mammoth_side.checkout_commit  # the checkout's short commit (one home: the Mammoth side's)


def is_checkout(path: Path) -> bool:
    return all((Path(path) / f).is_file() for f in ("er_main.py", "data.py", "mir.py", "buffer.py"))


def patched_source(text: str, file: str, patches=PATCHES) -> str:
    """``text`` (MIR's ``file``) with the edits of ``patches`` for that file; ``ValueError`` when one does
    not match its text exactly its stated number of times (another commit than the pinned one)."""
    for p in patches:
        if p.file != file:
            continue
        n = text.count(p.old)
        if n != p.count:
            raise ValueError(f"MIR's {file}: {p.old!r} found {n} times, expected {p.count} (MIR at {PINNED}?)")
        text = text.replace(p.old, p.new)
    return text


def _last_argmax(t):
    """torch 1.3's ``t.argmax()`` of a 1-D tensor: the last index of its maximum (torch >= 1.7: the first)."""
    return len(t) - 1 - t.flip(0).argmax()


# ----------------------------------------------------------------------------- the data feed


def read_jpeg(data_root: str | Path, image_folder: dict):
    """(x_train, y_train, x_test, y_test) of the image folder, read by the suite's reader (CHW uint8)."""
    from clsuite.core.data.imagefolder import read_image_folder

    return read_image_folder(data_root, {"source": "image_folder", "image_folder": dict(image_folder)},
                             download=False, verify=True)  # fmt: skip


def first_per_class(x: np.ndarray, y: np.ndarray, n: int | None) -> tuple[np.ndarray, np.ndarray]:
    """The first ``n`` images of each class in the given order (all when ``n`` is None): the smoke option."""
    if n is None:
        return x, y
    keep = np.concatenate([np.flatnonzero(y == c)[:n] for c in np.unique(y)])
    keep.sort()
    return x[keep], y[keep]


def torchvision_layout(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, list[int]]:
    """torchvision's CIFAR10 ``.data`` (uint8 [N, H, W, C]) and ``.targets`` (a list of ints) of CHW arrays."""
    x = np.asarray(x)
    if x.ndim != 4 or x.dtype != np.uint8:
        raise ValueError(f"images must be uint8 [N, C, H, W], got {x.dtype} {x.shape}")
    return np.ascontiguousarray(x.transpose(0, 2, 3, 1)), [int(v) for v in np.asarray(y)]


class JPEGCifar10:
    """``torchvision.datasets.CIFAR10`` as MIR's ``get_split_cifar10`` reads it: ``.data``, ``.targets``."""

    feed: ClassVar[dict] = {}  # {"data_root", "image_folder", "train_per_class", "test_per_class"}: set by the child

    def __init__(self, root=None, train=True, download=False, **_):
        f = self.feed
        xtr, ytr, xte, yte = read_jpeg(f["data_root"], f["image_folder"])
        x, y = (xtr, ytr) if train else (xte, yte)
        x, y = first_per_class(x, y, f.get("train_per_class" if train else "test_per_class"))
        self.data, self.targets = torchvision_layout(x, y)


def install_torchvision_stub() -> None:
    datasets = mammoth_side.stub_module("torchvision.datasets", CIFAR10=JPEGCifar10)
    transforms = mammoth_side.stub_module("torchvision.transforms")
    mammoth_side.stub_module("torchvision", datasets=datasets, transforms=transforms)


# ----------------------------------------------------------------------------- MIR's output

_FINAL = re.compile(r"^Run #(\d+) Final Results$", re.M)
_TEST = re.compile(r"^test:\n(\[\[.*?\]\])", re.M | re.S)


def _matrix(text: str) -> list[list[float]]:
    rows = re.findall(r"\[([^\[\]]*)\]", text)
    return [[float(v) for v in r.split()] for r in rows]


def parse_output(stdout: str) -> dict[int, list[list[float]]]:
    """``{run: LOG[run]['test']['acc']}`` from er_main.py's printout: the last ``test:`` matrix printed
    (l.216-217, after each task's evaluation) before ``Run #<run> Final Results`` (l.222)."""
    out, start = {}, 0
    for m in _FINAL.finditer(stdout):
        tests = _TEST.findall(stdout, start, m.start())
        if tests:
            out[int(m.group(1))] = _matrix(tests[-1])
        start = m.end()
    return out


def to_R(log_acc) -> list[list[float]]:
    """MIR's ``LOG[run]['test']['acc']`` ([task_t, task], fractions) as the suite's R (%, R[i][j] = task j
    after task i)."""
    a = np.asarray(log_acc, dtype=float)
    if a.ndim != 2 or a.shape[0] != a.shape[1]:
        raise ValueError(f"MIR's accuracy log is not square: {a.shape}")
    return (100.0 * a.T).round(6).tolist()


def check_tasks(train_ds, test_ds) -> None:
    """Every task of MIR's split holds exactly its two classes {2k, 2k+1} (MIR's docstring, data.py l.188)."""
    for split, dss in (("train", train_ds), ("test", test_ds)):
        for k, (_, y) in enumerate(dss):
            got = sorted({int(v) for v in y.tolist()})
            if got != [2 * k, 2 * k + 1]:
                raise RuntimeError(f"MIR's {split} task {k} holds classes {got}, not {[2 * k, 2 * k + 1]}")


# ----------------------------------------------------------------------------- the child


def child(spec: dict) -> None:
    """Run MIR's er_main.py as ``spec`` says (in this process: the child) and write its LOG's test accuracy."""
    root, out = Path(spec["root"]).resolve(), Path(spec["out"]).resolve()
    sys.path[:0] = [str(ROOT / "src")]
    from clsuite.config.numerics import apply

    apply(spec["numerics"])
    import torch

    torch.set_num_threads(1)
    install_torchvision_stub()
    JPEGCifar10.feed = spec["feed"]
    sys.path.insert(0, str(root))
    data = mammoth_side.stub_module("data", __file__=str(root / "data.py"), _last_argmax=_last_argmax)
    exec(compile(patched_source((root / "data.py").read_text(), "data.py"), data.__file__, "exec"), vars(data))
    split = data.get_split_cifar10

    def checked(args):  # MIR's own function, then the check of its tasks (nothing changed)
        tr, va, te = split(args)
        tr, va, te = list(tr), list(va), list(te)
        check_tasks([(d.x, d.y) for d in tr], [(d.x, d.y) for d in te])
        return tr, va, te

    data.get_split_cifar10 = checked
    seed = int(spec["seed"])
    sys.argv = ["er_main.py", *spec["argv"], "--n_runs", str(seed + 1), "--result_dir", "Results"]
    g = {"__name__": "__main__", "__file__": str(root / "er_main.py"), "_PARITY_RUNS": [seed]}
    os.chdir(spec["workdir"])
    exec(compile(patched_source((root / "er_main.py").read_text(), "er_main.py"), g["__file__"], "exec"), g)
    log = g["LOG"][seed]
    result = {"seed": seed, "test_acc": log["test"]["acc"].tolist(), "valid_acc": log["valid"]["acc"].tolist()}
    out.write_text(json.dumps(result) + "\n")


# ----------------------------------------------------------------------------- the parent


def run(root: str | Path, method: str, seed: int, *, data_root: str | Path, image_folder: dict,
        numerics: str = "portable", train_per_class: int | None = None, test_per_class: int | None = None,
        keep: str | Path | None = None) -> dict:  # fmt: skip
    """MIR's ``method`` (``er``/``mir``) at ``seed`` in a child process: {"R", "acc", "valid_R", "argv",
    "log"} (``log``: MIR's printout, kept in ``keep`` when given)."""
    root = Path(root).resolve()
    if method not in SCRIPT_LINES:
        raise ValueError(f"MIR's side runs {sorted(SCRIPT_LINES)}, not {method!r}")
    with tempfile.TemporaryDirectory(prefix="mir-parity-") as tmp:
        spec = {"root": str(root), "seed": seed, "argv": SCRIPT_LINES[method], "numerics": numerics,
                "workdir": tmp, "out": str(Path(tmp) / "log.json"),
                "feed": {"data_root": str(Path(data_root).resolve()), "image_folder": dict(image_folder),
                         "train_per_class": train_per_class, "test_per_class": test_per_class}}  # fmt: skip
        (Path(tmp) / "spec.json").write_text(json.dumps(spec))
        env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "PYTHONWARNINGS": "ignore::SyntaxWarning"}
        proc = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--child", str(Path(tmp) / "spec.json")],
                              capture_output=True, text=True, env=env, cwd=tmp)  # fmt: skip
        if keep is not None:
            Path(keep).mkdir(parents=True, exist_ok=True)
            (Path(keep) / f"mir_{method}_seed{seed}.log").write_text(proc.stdout + proc.stderr)
        if proc.returncode != 0:
            raise RuntimeError(f"MIR's er_main.py ({method}, seed {seed}) failed:\n{proc.stderr[-3000:]}")
        logged = json.loads(Path(spec["out"]).read_text())
    printed = parse_output(proc.stdout).get(seed)
    if printed is None or not np.allclose(printed, logged["test_acc"]):
        raise RuntimeError(f"MIR's printed test matrix {printed} is not its LOG {logged['test_acc']}")
    R = to_R(logged["test_acc"])
    return {"R": R, "acc": float(np.mean(R[-1])), "valid_R": to_R(logged["valid_acc"]), "argv": SCRIPT_LINES[method],
            "log": proc.stdout}  # fmt: skip


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--child", help=argparse.SUPPRESS)
    a, _ = ap.parse_known_args(argv)
    if a.child:
        child(json.loads(Path(a.child).read_text()))
        return 0
    ap.error("run through scripts/parity/harness.py --mir <checkout> (make parity MIR=<checkout>)")
    return 2


if __name__ == "__main__":
    sys.exit(main())
