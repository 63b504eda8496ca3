"""Benchmarks from files in the real formats (synthetic content): sizes, class orders, errors."""

from __future__ import annotations

import gzip
import os
import pickle
import re
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from clsuite.config.check import ConfigError, validate
from clsuite.core.data import files
from clsuite.core.data.benchmarks import split_tasks
from clsuite.core.data.datamodule import ContinualDataModule
from clsuite.core.data.files import DataError, load_cifar, load_mnist_like, md5
from clsuite.core.data.sources import bind
from clsuite.core.models.nets import build_model
from tests.conftest import make_cfg

ROOT = Path(__file__).resolve().parents[2]
BENCH = {
    name: dict(make_cfg(f"benchmark={name}").benchmark)
    for name in ("split_mnist", "split_fmnist", "split_cifar10", "split_cifar100")
}


def write_idx(path, arr):
    header = struct.pack(">HBB", 0, 8, arr.ndim) + struct.pack(f">{arr.ndim}I", *arr.shape)
    with gzip.open(path, "wb") as f:
        f.write(header + arr.astype(np.uint8).tobytes())


def fake_mnist(root, name, per_class_train=620, per_class_test=30):
    raw = root / name / "raw"
    raw.mkdir(parents=True)
    rng = np.random.default_rng(0)
    for split, n in (("train", per_class_train), ("t10k", per_class_test)):
        y = np.repeat(np.arange(10), n)
        rng.shuffle(y)
        x = rng.integers(0, 256, size=(len(y), 28, 28))
        write_idx(raw / f"{split}-images-idx3-ubyte.gz", x)
        write_idx(raw / f"{split}-labels-idx1-ubyte.gz", y)


def fake_cifar(root, name, n_classes, per_class_train, per_class_test):
    spec = {
        "cifar10": ("cifar-10-batches-py", [f"data_batch_{i}" for i in range(1, 6)], ["test_batch"], "labels"),
        "cifar100": ("cifar-100-python", ["train"], ["test"], "fine_labels"),
    }[name]
    folder = root / spec[0]
    folder.mkdir(parents=True)
    rng = np.random.default_rng(0)
    for names, per_class in ((spec[1], per_class_train), (spec[2], per_class_test)):
        y = np.repeat(np.arange(n_classes), per_class)
        rng.shuffle(y)
        for fname, part in zip(names, np.array_split(np.arange(len(y)), len(names)), strict=True):
            d = {"data": rng.integers(0, 256, size=(len(part), 3072), dtype=np.uint8), spec[3]: y[part].tolist()}
            with open(folder / fname, "wb") as f:
                pickle.dump(d, f)


def datamodule(bench, root, **data):
    cfg = {"root": str(root), "verify_md5": False, **data}
    return ContinualDataModule(bind(bench), cfg, seed=data.pop("seed", 0) if "seed" in data else 0).prepare()


@pytest.mark.parametrize("name,source", [("split_mnist", "MNIST"), ("split_fmnist", "FashionMNIST")])
def test_mnist_like_split_sizes_and_class_order(tmp_path, name, source):
    fake_mnist(tmp_path, source)
    dm = datamodule(BENCH[name], tmp_path)
    per_class = BENCH[name]["train_per_class"]
    assert [tk.classes for tk in dm.tasks] == [[0, 1], [2, 3], [4, 5], [6, 7], [8, 9]]
    for tk in dm.tasks:
        x, y = tk.train
        assert x.shape == (2 * per_class, 1, 28, 28) and x.dtype == torch.float32
        assert float(x.min()) >= 0.0 and float(x.max()) <= 1.0
        assert torch.bincount(y, minlength=10)[tk.classes].tolist() == [per_class, per_class]
        assert len(tk.test[1]) == 60 and set(tk.test[1].tolist()) == set(tk.classes)  # all test images of the classes
    assert dm.input_shape == (1, 28, 28) and dm.num_classes == 10


def test_cifar10_split_uses_all_samples(tmp_path):
    fake_cifar(tmp_path, "cifar10", 10, per_class_train=30, per_class_test=7)
    dm = datamodule(BENCH["split_cifar10"], tmp_path)
    assert len(dm.tasks) == 5
    for k, tk in enumerate(dm.tasks):
        assert tk.classes == [2 * k, 2 * k + 1]
        assert tk.train[0].shape == (60, 3, 32, 32) and len(tk.test[1]) == 14


def test_cifar100_has_fifty_two_class_tasks(tmp_path):
    fake_cifar(tmp_path, "cifar100", 100, per_class_train=5, per_class_test=2)
    dm = datamodule(BENCH["split_cifar100"], tmp_path)
    assert len(dm.tasks) == 50 and dm.tasks[49].classes == [98, 99] and dm.num_classes == 100
    assert all(len(tk.train[1]) == 10 for tk in dm.tasks)
    assert BENCH["split_cifar100"]["iters_per_batch"] == 5


def test_random_class_order_is_a_seeded_permutation(tmp_path):
    fake_mnist(tmp_path, "MNIST")
    a = datamodule(BENCH["split_mnist"], tmp_path, class_order="random")
    b = datamodule(BENCH["split_mnist"], tmp_path, class_order="random")
    classes = [c for tk in a.tasks for c in tk.classes]
    assert sorted(classes) == list(range(10)) and classes != list(range(10))
    assert classes == [c for tk in b.tasks for c in tk.classes]


def test_samples_drawn_with_the_seed(tmp_path):
    fake_mnist(tmp_path, "MNIST")
    bench = BENCH["split_mnist"]
    a = ContinualDataModule(bind(bench), {"root": str(tmp_path), "verify_md5": False}, seed=0).prepare()
    b = ContinualDataModule(bind(bench), {"root": str(tmp_path), "verify_md5": False}, seed=1).prepare()
    assert not torch.equal(a.tasks[0].train[0], b.tasks[0].train[0])


def test_validation_split_is_held_out_of_train(tmp_path):
    fake_mnist(tmp_path, "MNIST")
    dm = datamodule(BENCH["split_mnist"], tmp_path, val_fraction=0.05)
    tk = dm.tasks[0]
    assert len(tk.val[1]) == 50 and len(tk.train[1]) == 950
    tr = {tuple(r) for r in tk.train[0].flatten(1)[:, :40].tolist()}
    assert not any(tuple(r) in tr for r in tk.val[0].flatten(1)[:, :40].tolist())


@pytest.mark.parametrize(
    "lam,semantics,expected", [(0.0, "keep", 500), (0.5, "keep", 250), (0.9, "keep", 50), (0.2, "ratio", 100)]
)
def test_imbalance_lambda_shrinks_one_class_per_task(tmp_path, lam, semantics, expected):
    fake_mnist(tmp_path, "MNIST")
    dm = datamodule(BENCH["split_mnist"], tmp_path, imbalance=lam, imbalance_semantics=semantics)
    for tk in dm.tasks:
        counts = sorted(torch.bincount(tk.train[1], minlength=10)[tk.classes].tolist())
        assert counts == ([expected, 500] if lam else [500, 500])


def test_domain_il_maps_labels_to_position_in_task(tmp_path):
    fake_mnist(tmp_path, "MNIST")
    dm = ContinualDataModule(
        bind(BENCH["split_mnist"]), {"root": str(tmp_path), "verify_md5": False}, scenario="domain_il"
    ).prepare()
    assert dm.num_classes == 2
    _, y, t = dm.split(3, "test")  # classes 6, 7 -> 0, 1
    assert set(y.tolist()) == {0, 1} and set(t.tolist()) == {3}


def test_split_tasks_is_pure_in_seed():
    rng = np.random.default_rng(0)
    arrays = (
        rng.integers(0, 255, (400, 1, 4, 4)),
        np.repeat(np.arange(4), 100),
        rng.integers(0, 255, (40, 1, 4, 4)),
        np.repeat(np.arange(4), 10),
    )
    a = split_tasks(arrays, 2, 2, 50, seed=5)
    b = split_tasks(arrays, 2, 2, 50, seed=5)
    assert torch.equal(a[1].train[0], b[1].train[0])


def test_corrupted_file_gives_one_line_error(tmp_path):
    fake_mnist(tmp_path, "MNIST")
    with pytest.raises(DataError) as e:
        load_mnist_like(tmp_path, "MNIST")  # md5 of fake files cannot match
    msg = str(e.value)
    assert "corrupted data file" in msg and "md5" in msg and "\n" not in msg
    (tmp_path / "MNIST" / "raw" / "t10k-labels-idx1-ubyte.gz").write_bytes(b"not gzip")
    with pytest.raises(DataError, match="unreadable idx file"):
        load_mnist_like(tmp_path, "MNIST", verify=False)


def test_missing_files_error_names_folder_files_and_remedy(tmp_path):
    with pytest.raises(DataError) as e:
        load_mnist_like(tmp_path, "FashionMNIST")
    msg = str(e.value)
    assert str(tmp_path) in msg and "train-images-idx3-ubyte.gz" in msg and "DATA_DIR" in msg and "\n" not in msg
    with pytest.raises(DataError, match=r"cifar-10-python\.tar\.gz"):
        load_cifar(tmp_path, "cifar10")


MNIST_REFUSED = {  # what stands at MNIST/raw/t10k-labels-idx1-ubyte.gz: the config check's error line
    "FIFO": "data file {} is a FIFO, not a regular file",
    "device": "data file {} is a character device, not a regular file",
    "folder": "data file {} is a folder, not a regular file",
    "empty": "data file {} is empty (0 bytes)",
    "md5": "corrupted data file {}: md5 ",
}


@pytest.mark.parametrize("case", MNIST_REFUSED)
def test_the_config_check_opens_each_data_file_as_a_regular_file_and_checks_its_md5(tmp_path, monkeypatch, case):
    """A FIFO passed the check (the run then hung), an empty file or an md5 mismatch was refused only
    in the run, after Hydra had made its folder. (The fake files' md5 stand for the published ones.)"""
    fake_mnist(tmp_path, "MNIST")
    raw = tmp_path / "MNIST" / "raw"
    published = {f: md5(raw / f) for f in files.MNIST_LIKE["MNIST"]["files"]}
    monkeypatch.setitem(files.MNIST_LIKE, "MNIST", {**files.MNIST_LIKE["MNIST"], "files": published})
    cfg = make_cfg("benchmark=split_mnist", f"data.root={tmp_path}")
    validate(cfg)
    target = raw / "t10k-labels-idx1-ubyte.gz"
    target.unlink()
    if case == "FIFO":
        os.mkfifo(target)
    elif case == "device":
        os.symlink("/dev/zero", target)
    elif case == "folder":
        target.mkdir()
    elif case == "empty":
        target.write_bytes(b"")
    else:
        write_idx(target, np.zeros(300, dtype=np.uint8))
    with pytest.raises(ConfigError, match="^" + re.escape(MNIST_REFUSED[case].format(target))):
        validate(cfg)


def test_a_corrupted_data_file_is_refused_before_hydra_makes_a_folder(tmp_path):
    """It was one error line, exit 2, but after Hydra had made outputs/<experiment>/<run>/."""
    fake_mnist(tmp_path / "data", "MNIST")
    cmd = [sys.executable, str(ROOT / "src" / "run.py"), f"data.root={tmp_path / 'data'}", "logger=none", "trainer=cpu"]
    p = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    lines = p.stderr.splitlines()
    assert p.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: corrupted data file "), p.stderr
    assert [q.name for q in tmp_path.iterdir()] == ["data"]  # no outputs/


def test_an_idx_stream_is_read_no_further_than_its_dimensions(tmp_path):
    """A gzip stream longer than its header says was read whole before being refused (data.verify_md5=false
    reads any file): 64 MB of trailing zeros cost 64 MB. Now at most a block past the declared bytes."""
    import tracemalloc

    f = tmp_path / "labels.gz"
    for tail, problem in ((b"", None), (bytes(64 << 20), "long"), (bytes(1), "long"), (b"", "short")):
        with gzip.open(f, "wb") as g:
            g.write(struct.pack(">HBBI", 0, 8, 1, 300) + bytes(300 if problem != "short" else 299) + tail)
        tracemalloc.start()
        try:
            got = files._read_idx(f).shape
        except DataError as e:
            got = str(e)
        finally:
            peak = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
        assert peak < 4 << 20, (len(tail), peak)
        if problem is None:
            assert got == (300,)
        else:
            assert re.match(r"^unreadable idx file .*: its data does not match its dimensions \[300\]$", got), got


def test_parameter_counts():
    assert sum(p.numel() for p in build_model("mlp", (1, 28, 28), 10).parameters()) == 478_410
    assert sum(p.numel() for p in build_model("resnet18", (3, 32, 32), 10).parameters()) == 1_094_750


def test_download_fetches_md5_checked_files_into_root(tmp_path, monkeypatch):
    """data.download=true (what `make run` passes without ../shared/datasets): the four MNIST files
    are fetched from the mirror, md5-checked, kept; a file with the wrong md5 is not kept.
    The mirror here is a local folder (file:// URL): no network at test time."""
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    for i, f in enumerate(files.MNIST_LIKE["MNIST"]["files"]):
        (mirror / f).write_bytes(bytes([i]) * 100)
    spec = {
        "mirror": mirror.as_uri() + "/",
        "files": {f: files.md5(mirror / f) for f in files.MNIST_LIKE["MNIST"]["files"]},
    }
    monkeypatch.setitem(files.MNIST_LIKE, "MNIST", spec)
    monkeypatch.setattr(files, "_read_idx", lambda path: np.zeros((2, 28, 28), dtype=np.uint8))
    files.load_mnist_like(tmp_path / "data", "MNIST", download=True)
    raw = tmp_path / "data" / "MNIST" / "raw"
    assert sorted(p.name for p in raw.iterdir()) == sorted(spec["files"])
    # a corrupted download: DataError, nothing kept
    (raw / "t10k-labels-idx1-ubyte.gz").unlink()
    spec["files"]["t10k-labels-idx1-ubyte.gz"] = "0" * 32
    with pytest.raises(files.DataError, match="has the wrong md5"):
        files.load_mnist_like(tmp_path / "data", "MNIST", download=True)
    assert not (raw / "t10k-labels-idx1-ubyte.gz").exists() and not list(raw.glob("*.part"))
