"""Reading the standard dataset files without torchvision.

MNIST / Fashion-MNIST: the four idx ``.gz`` files under ``<root>/<Name>/raw/``
(torchvision's layout). CIFAR-10/100: the official python pickles, either the
extracted ``<root>/cifar-10-batches-py/`` folder or the archive beside it.
Every file is opened as a regular file (:func:`open_regular`: a FIFO or a device is refused, never
waited on) and md5-checked before it is read (:func:`check_mnist_like`, :func:`check_cifar`, which
``clsuite.config.check.validate`` runs before any folder is made); a missing or corrupted file raises
``DataError`` with one line naming the directory, the files and how to get them.
Decoding is a few lines of numpy: the images become one uint8 array per split, decoded once
per process (memoised on the files' path, size and mtime) and shared read-only by its jobs.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import pickle
import stat
import tarfile
import urllib.request
from pathlib import Path
from typing import BinaryIO

import numpy as np


class DataError(RuntimeError):
    """A dataset file is missing or corrupted (message is a single line)."""


# (as clsuite.run.io's, which this module cannot import: data/files is on the ground floor of its chain)
_KINDS = {stat.S_IFIFO: "FIFO", stat.S_IFCHR: "character device", stat.S_IFBLK: "block device",
          stat.S_IFSOCK: "socket", stat.S_IFDIR: "folder"}  # fmt: skip


def kind(mode: int) -> str:
    """What a stat mode is, for an error line: ``FIFO``, ``folder``, ..."""
    return _KINDS.get(stat.S_IFMT(mode), "special file")


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


def open_regular(path: str | Path) -> BinaryIO:
    """``path`` opened for reading when it is a regular file (a link is followed), else ``DataError``.

    Opened non-blocking and checked on the open descriptor: a FIFO or a device in place of a data
    file is refused at once instead of being waited on or read without end."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise DataError(f"missing data file {path}") from None
    except OSError as e:
        raise DataError(f"unreadable data file {path}: {e.strerror or e}") from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise DataError(f"data file {path} is a {kind(mode)}, not a regular file")
    os.set_blocking(fd, True)
    return os.fdopen(fd, "rb")


def md5(path: Path, chunk: int = 1 << 20) -> str:
    with open_regular(path) as f:
        return _md5(f, chunk)


def _md5(f: BinaryIO, chunk: int = 1 << 20) -> str:
    h = hashlib.md5()
    while block := f.read(chunk):
        h.update(block)
    return h.hexdigest()


_DIGESTS: dict[tuple, str] = {}  # (path, size, mtime_ns, inode, ctime_ns) -> md5: each file hashed once per process


def file_md5(path: str | Path) -> str:
    """md5 of a data file, memoised on its (path, size, mtime, inode, ctime): the config check
    (``clsuite.config.check.validate``), the loader and the run's identity (``clsuite.run.identity.data_identity``)
    share one hash. Not a regular file, or unreadable: ``DataError``."""
    path = Path(path).resolve()
    with open_regular(path) as f:
        try:
            st = os.fstat(f.fileno())
            key = (str(path), st.st_size, st.st_mtime_ns, st.st_ino, st.st_ctime_ns)
            if key not in _DIGESTS:
                _DIGESTS[key] = _md5(f)
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
    else None: not a regular file (a FIFO, a device; a folder unless ``folders``: an image-folder
    archive), empty, or not readable. A missing file is :func:`absent`'s."""
    root = Path(root)
    for rel in rels:
        p = root / rel
        try:
            st = p.stat()
        except FileNotFoundError:
            continue
        except OSError as e:
            return f"unreadable data file {p}: {e.strerror or e}"
        if stat.S_ISDIR(st.st_mode) and folders:
            continue
        if not stat.S_ISREG(st.st_mode):
            return f"data file {p} is a {kind(st.st_mode)}, not a regular file"
        if st.st_size == 0:
            return f"data file {p} is empty (0 bytes)"
        if not os.access(p, os.R_OK):
            return f"unreadable data file {p}: permission denied"
    return None


def _check(path: Path, expected: str, how: str, verify: bool = True) -> None:
    if not path.exists():
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
    """An idx file of unsigned bytes, read no further than its header's dimensions: a longer or
    shorter stream is refused."""
    try:
        with open_regular(path) as raw, gzip.GzipFile(fileobj=raw) as f:
            head = f.read(4)
            if len(head) < 4 or head[:3] != b"\0\0\x08":
                raise ValueError("not an idx file of unsigned bytes")
            dims = np.frombuffer(f.read(4 * head[3]), dtype=">i4", count=head[3]).astype(np.int64)
            chunks, left = [], int(np.prod(dims))
            while left > 0 and (block := f.read(min(left, 1 << 24))):
                chunks.append(block)
                left -= len(block)
            if left or f.read(1):
                raise ValueError(f"its data does not match its dimensions {dims.tolist()}")
        return np.frombuffer(b"".join(chunks), dtype=np.uint8).reshape(dims)
    except (OSError, EOFError, ValueError, IndexError) as e:
        raise DataError(f"unreadable idx file {path}: {e}") from None


def check_mnist_like(root: str | Path, name: str, *, verify: bool, download: bool = False) -> None:
    """The md5 of each of the source's files (``verify``; hashed either way, for the run's identity);
    with ``download``, a file not there yet is left to the loader. Missing or corrupted: ``DataError``."""
    spec = MNIST_LIKE[name]
    raw = Path(root) / name / "raw"
    how = (
        f"expected {', '.join(spec['files'])} in {raw}; set DATA_DIR or data.root to the folder "
        f"holding {name}/raw/, or run once with data.download=true on a machine with network"
    )
    for fname, digest in spec["files"].items():
        if not (download and not (raw / fname).exists()):
            _check(raw / fname, digest, how, verify)


def load_mnist_like(root: str | Path, name: str, download: bool = False, verify: bool = True):
    """(x_train, y_train, x_test, y_test) as uint8 arrays, x of shape (N, 1, 28, 28)."""
    spec = MNIST_LIKE[name]
    raw = Path(root) / name / "raw"
    for fname, digest in spec["files"].items():
        if download and not (raw / fname).exists():
            _download(spec["mirror"] + fname, raw / fname, digest)
    check_mnist_like(root, name, verify=verify)
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
            with open_regular(folder / n) as f:
                d = pickle.load(f, encoding="latin1")  # md5-verified official file
        except (OSError, EOFError, pickle.UnpicklingError, ValueError) as e:
            raise DataError(f"unreadable CIFAR file {folder / n}: {e}") from None
        xs.append(np.asarray(d["data"], dtype=np.uint8).reshape(-1, 3, 32, 32))
        ys.append(np.asarray(d[label_key], dtype=np.int64))
    return np.concatenate(xs), np.concatenate(ys)


def check_cifar(root: str | Path, name: str, *, verify: bool, download: bool = False) -> None:
    """The md5 of the extracted folder's files, else of the archive beside it (``verify``; hashed
    either way); with ``download``, neither there yet is left to the loader. Else ``DataError``."""
    spec = CIFAR[name]
    root = Path(root)
    folder = root / spec["folder"]
    archive, archive_md5 = spec["archive"]
    how = (
        f"expected {spec['folder']}/ ({', '.join([*spec['train'], *spec['test']])}) or {archive} "
        f"in {root}; download {spec['url']} there, or run once with data.download=true"
    )
    if folder.is_dir():
        for fname, digest in {**spec["train"], **spec["test"]}.items():
            _check(folder / fname, digest, how, verify)
    elif (root / archive).exists():
        _check(root / archive, archive_md5, how, verify)
    elif not download:
        raise DataError(f"missing CIFAR data in {root} ({how})")


def load_cifar(root: str | Path, name: str, download: bool = False, verify: bool = True):
    """(x_train, y_train, x_test, y_test) as uint8 arrays, x of shape (N, 3, 32, 32)."""
    spec = CIFAR[name]
    root = Path(root)
    folder = root / spec["folder"]
    archive, archive_md5 = spec["archive"]
    if not folder.is_dir():
        if download and not (root / archive).exists():
            _download(spec["url"], root / archive, archive_md5)
        check_cifar(root, name, verify=verify)  # the archive's md5
        try:
            with open_regular(root / archive) as f, tarfile.open(fileobj=f) as tar:
                tar.extractall(root, filter="data")
        except (tarfile.TarError, EOFError) as e:
            raise DataError(f"unreadable CIFAR archive {root / archive}: {e}") from None
    check_cifar(root, name, verify=verify)  # the folder's files

    def decode():
        xtr, ytr = _read_cifar_batches(folder, spec["train"], spec["label_key"])
        xte, yte = _read_cifar_batches(folder, spec["test"], spec["label_key"])
        return xtr, ytr, xte, yte

    return _decoded([folder / f for f in (*spec["train"], *spec["test"])], decode)


def absent(root: str | Path, rels, source: str, downloads: bool) -> str | None:
    """The first file of ``rels`` (the files of benchmark.source ``source``, relative to ``root``) that
    is not there, as one line naming it and how to get it (``data.download=true`` where the source
    ``downloads``); None when all are. A CIFAR folder's files count as there when the archive beside
    it is (the loader reads either). Checked before any run (``clsuite.config.check.validate``), so a run
    without its data leaves no folder."""
    root = Path(root)
    for rel in rels:
        if (root / rel).exists():
            continue
        if not downloads:
            return (
                f"missing data file {root / rel}; benchmark.source {source} cannot download it, data.download=true "
                f"or not: put it there, or set DATA_DIR or data.root to the folder that holds {rel}"
            )
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
