"""Reading the standard dataset files without torchvision.

MNIST / Fashion-MNIST: the four idx ``.gz`` files under ``<root>/<Name>/raw/``
(torchvision's layout). CIFAR-10/100: the official python pickles, either the
extracted ``<root>/cifar-10-batches-py/`` folder or the archive beside it.
Every file is md5-checked before it is read; a missing or corrupted file raises
``DataError`` with one line naming the directory, the files and how to get them.
Decoding is a few lines of numpy: the images become one uint8 array per split, decoded once
per process (memoised on the files' path, size and mtime) and shared read-only by its jobs.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import pickle
import tarfile
import urllib.request
from pathlib import Path

import numpy as np


class DataError(RuntimeError):
    """A dataset file is missing or corrupted (message is a single line)."""


# md5 of the official releases (the same values torchvision checks).
MNIST_LIKE = {
    "MNIST": {
        "mirror": "https://ossci-datasets.s3.amazonaws.com/mnist/",
        "files": {
            "train-images-idx3-ubyte.gz": "f68b3c2dcbeaaa9fbdd348bbdeb94873",
            "train-labels-idx1-ubyte.gz": "d53e105ee54ea40749a09fcbcd1e9432",
            "t10k-images-idx3-ubyte.gz": "9fb629c4189551a2d022fa330f9573f3",
            "t10k-labels-idx1-ubyte.gz": "ec29112dd5afa0611ce80d1b7f02629c",
        },
    },
    "FashionMNIST": {
        "mirror": "http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/",
        "files": {
            "train-images-idx3-ubyte.gz": "8d4fb7e6c68d591d4c3dfef9ec88bf0d",
            "train-labels-idx1-ubyte.gz": "25c81989df183df01b3e8a0aad5dffbe",
            "t10k-images-idx3-ubyte.gz": "bef4ecab320f06d8554ea6380940ec79",
            "t10k-labels-idx1-ubyte.gz": "bb300cfdad3c16e7a12a480ee83cd310",
        },
    },
}

CIFAR = {
    "cifar10": {
        "url": "https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz",
        "archive": ("cifar-10-python.tar.gz", "c58f30108f718f92721af3b95e74349a"),
        "folder": "cifar-10-batches-py",
        "train": {
            "data_batch_1": "c99cafc152244af753f735de768cd75f",
            "data_batch_2": "d4bba439e000b95fd0a9bffe97cbabec",
            "data_batch_3": "54ebc095f3ab1f0389bbae665268c751",
            "data_batch_4": "634d18415352ddfa80567beed471001a",
            "data_batch_5": "482c414d41f54cd18b22e5b47cb7c3cb",
        },
        "test": {"test_batch": "40351d587109b95175f43aff81a1287e"},
        "label_key": "labels",
    },
    "cifar100": {
        "url": "https://www.cs.toronto.edu/~kriz/cifar-100-python.tar.gz",
        "archive": ("cifar-100-python.tar.gz", "eb9058c3a382ffc7106e4002c42a8d85"),
        "folder": "cifar-100-python",
        "train": {"train": "16019d7e3df5f24257cddd939b257f8d"},
        "test": {"test": "f0ef6b0ae62326f3e7ffdfab6717acfc"},
        "label_key": "fine_labels",
    },
}


def md5(path: Path, chunk: int = 1 << 20) -> str:
    h = hashlib.md5()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


_DIGESTS: dict[tuple, str] = {}  # (path, size, mtime_ns) -> md5: each file hashed once per process


def file_md5(path: str | Path) -> str:
    """md5 of a data file, memoised on (path, size, mtime): the loader's check and the run's
    identity (``clsuite.identity.data_identity``) share one hash. Unreadable: ``DataError``."""
    path = Path(path).resolve()
    try:
        st = path.stat()
        key = (str(path), st.st_size, st.st_mtime_ns)
        if key not in _DIGESTS:
            _DIGESTS[key] = md5(path)
    except OSError as e:
        raise DataError(f"unreadable data file {path}: {e.strerror or e}") from None
    return _DIGESTS[key]


def source_files(source: str) -> list[str]:
    """The files a source reads, relative to ``data.root`` (the run's data identity)."""
    if source in MNIST_LIKE:
        return [f"{source}/raw/{f}" for f in MNIST_LIKE[source]["files"]]
    if source in CIFAR:
        spec = CIFAR[source]
        return [f"{spec['folder']}/{f}" for f in (*spec["train"], *spec["test"])]
    return []


def unreadable(root: str | Path, rels, folders: bool = False) -> str | None:
    """A one-line problem with a source's files (``rels``, relative to ``root``) that needs no hashing,
    else None; ``folders``: an entry may be a folder (an image-folder archive)."""
    root = Path(root)
    for rel in rels:
        p = root / rel
        if p.exists() and not os.access(p, os.R_OK):
            return f"unreadable data file {p}: permission denied"
        if p.is_dir() and not folders:
            return f"data file {p} is a directory"
    return None


def _check(path: Path, expected: str, how: str, verify: bool = True) -> None:
    if not path.is_file():
        raise DataError(f"missing data file {path} ({how})")
    got = file_md5(path)  # also without verify: the run's identity records it
    if verify and got != expected:
        raise DataError(f"corrupted data file {path}: md5 {got}, expected {expected} ({how})")


def _download(url: str, dest: Path, expected: str) -> None:
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_suffix(dest.suffix + ".part")
    try:
        urllib.request.urlretrieve(url, tmp)  # fixed mirrors above
    except OSError as e:
        raise DataError(f"could not download {url} into {dest.parent}: {e}") from None
    if md5(tmp) != expected:
        tmp.unlink(missing_ok=True)
        raise DataError(f"downloaded {url} has the wrong md5 (expected {expected}); not kept")
    os.replace(tmp, dest)


def _read_idx(path: Path) -> np.ndarray:
    try:
        with gzip.open(path, "rb") as f:
            data = f.read()
        ndim = data[3]
        dims = np.frombuffer(data, dtype=">i4", count=ndim, offset=4)
        return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)
    except (OSError, EOFError, ValueError, IndexError) as e:
        raise DataError(f"unreadable idx file {path}: {e}") from None


def load_mnist_like(root: str | Path, name: str, download: bool = False, verify: bool = True):
    """(x_train, y_train, x_test, y_test) as uint8 arrays, x of shape (N, 1, 28, 28)."""
    spec = MNIST_LIKE[name]
    raw = Path(root) / name / "raw"
    how = (
        f"expected {', '.join(spec['files'])} in {raw}; set DATA_DIR or data.root to the folder "
        f"holding {name}/raw/, or run once with data.download=true on a machine with network"
    )
    for fname, digest in spec["files"].items():
        if download and not (raw / fname).is_file():
            _download(spec["mirror"] + fname, raw / fname, digest)
        _check(raw / fname, digest, how, verify)
    return _decoded([raw / f for f in spec["files"]], lambda: _decode_mnist_like(raw))


def _decode_mnist_like(raw: Path):
    xtr = _read_idx(raw / "train-images-idx3-ubyte.gz")[:, None]
    ytr = _read_idx(raw / "train-labels-idx1-ubyte.gz")
    xte = _read_idx(raw / "t10k-images-idx3-ubyte.gz")[:, None]
    yte = _read_idx(raw / "t10k-labels-idx1-ubyte.gz")
    return xtr, ytr.astype(np.int64), xte, yte.astype(np.int64)


_ARRAYS: dict[tuple, tuple] = {}  # the files' (path, size, mtime_ns) -> their decoded arrays, read-only


def _decoded(paths, decode):
    """``decode()``'s arrays, memoised per process on the files' (path, size, mtime): the jobs of
    a sweep that run in one process (basic launcher, a joblib worker) decode the files once.
    Called after the md5 check; the arrays are made read-only, so no job can change another's."""
    key = tuple((str(Path(p).resolve()), Path(p).stat().st_size, Path(p).stat().st_mtime_ns) for p in paths)
    if key not in _ARRAYS:
        arrays = decode()
        for a in arrays:
            a.flags.writeable = False
        _ARRAYS[key] = arrays
    return _ARRAYS[key]


def _read_cifar_batches(folder: Path, names, label_key: str):
    xs, ys = [], []
    for n in names:
        try:
            with open(folder / n, "rb") as f:
                d = pickle.load(f, encoding="latin1")  # md5-verified official file
        except (OSError, EOFError, pickle.UnpicklingError, ValueError) as e:
            raise DataError(f"unreadable CIFAR file {folder / n}: {e}") from None
        xs.append(np.asarray(d["data"], dtype=np.uint8).reshape(-1, 3, 32, 32))
        ys.append(np.asarray(d[label_key], dtype=np.int64))
    return np.concatenate(xs), np.concatenate(ys)


def load_cifar(root: str | Path, name: str, download: bool = False, verify: bool = True):
    """(x_train, y_train, x_test, y_test) as uint8 arrays, x of shape (N, 3, 32, 32)."""
    spec = CIFAR[name]
    root = Path(root)
    folder = root / spec["folder"]
    archive, archive_md5 = spec["archive"]
    how = (
        f"expected {spec['folder']}/ ({', '.join([*spec['train'], *spec['test']])}) or {archive} "
        f"in {root}; download {spec['url']} there, or run once with data.download=true"
    )
    if not folder.is_dir():
        if download and not (root / archive).is_file():
            _download(spec["url"], root / archive, archive_md5)
        if not (root / archive).is_file():
            raise DataError(f"missing CIFAR data in {root} ({how})")
        _check(root / archive, archive_md5, how, verify)
        with tarfile.open(root / archive) as tar:
            tar.extractall(root, filter="data")
    for fname, digest in {**spec["train"], **spec["test"]}.items():
        _check(folder / fname, digest, how, verify)

    def decode():
        xtr, ytr = _read_cifar_batches(folder, spec["train"], spec["label_key"])
        xte, yte = _read_cifar_batches(folder, spec["test"], spec["label_key"])
        return xtr, ytr, xte, yte

    return _decoded([folder / f for f in (*spec["train"], *spec["test"])], decode)


def absent(root: str | Path, rels) -> str | None:
    """The first file of ``rels`` (a source's files, relative to ``root``) that is not there, as one
    line naming it and how to get it; None when all are. A CIFAR folder's files count as there when
    the archive beside it is (the loader reads either). Checked before any run
    (``clsuite.config.validate``), so a run without its data leaves no folder."""
    root = Path(root)
    for rel in rels:
        if (root / rel).exists():
            continue
        cifar = next((c for c in CIFAR.values() if str(rel).startswith(c["folder"] + "/")), None)
        if cifar is not None and (root / cifar["archive"][0]).is_file():
            continue
        if cifar is not None:
            return (
                f"missing CIFAR data in {root} (expected {cifar['folder']}/ or {cifar['archive'][0]}; download "
                f"{cifar['url']} there, or run once with data.download=true)"
            )
        where = str(rel).split("/raw/")[0] + "/raw/" if "/raw/" in str(rel) else "the data set's files"
        return (
            f"missing data file {root / rel}; set DATA_DIR or data.root to the folder holding {where}, or run "
            "once with data.download=true on a machine with network"
        )
    return None
