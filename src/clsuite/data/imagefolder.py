"""Image-folder archives: ``train/<class>/<image>`` and ``test/<class>/<image>``, decoded once.

The reader of source ``image_folder`` (registered in ``clsuite.data.sources``; docs/EXTENDING.md).
A benchmark names its archive and sizes under ``benchmark.image_folder`` (conf/benchmark/
split_cifar10_jpeg.yaml). Steps of :func:`read_image_folder`:

1. The archive ``<data.root>/<image_folder.path>``: a directory, a ``.tar`` or a ``.tar.gz`` /
   ``.tgz``. Its checksum (:func:`checksum`): the md5 of the file; of a directory, the md5 of its
   files' sorted ``<relative path> <md5>`` lines. With ``data.verify_md5`` and ``image_folder.md5``
   given, a different checksum is a ``DataError`` (the run's identity records it either way).
2. The disk cache (:func:`cache_file`): ``<cache dir>/image_folder/<checksum>-<key>.npz``, where
   ``key`` hashes the channels, the decoder (Pillow and libjpeg-turbo versions: another decoder may
   give other pixels) and :data:`FORMAT`. A readable, well-formed file there is loaded and nothing
   is decoded. The cache dir: ``data.cache_dir``, else ``$CLSUITE_CACHE_DIR``, else
   ``$XDG_CACHE_HOME/clsuite``, else ``~/.cache/clsuite``.
3. Otherwise every member ``[<prefix>/](train|test)/<class>/<file>`` is read (other members are
   ignored, names starting with ``.`` too; one prefix for all, e.g. none or ``cifar10/``), in the
   order split, class, file. Labels: the class folders' names sorted as strings (label = index;
   CIFAR-10's folder names sort into its official label order); train and test must hold the same
   classes. Files within a class: by name, numbers compared as numbers (``2.png`` before
   ``10.png``). Each image is decoded with Pillow (torchvision is not needed) and converted to
   ``image_folder.channels`` (1: ``L``, 3: ``RGB``); all must have one size (no resizing).
4. Checks against the benchmark's declared sizes (which the config check used before any file was
   read): the number of classes equals ``image_folder.classes`` and the smallest training class
   has ``image_folder.train_per_class`` images; else a ``DataError`` naming both.
5. The arrays, ``x`` uint8 ``(N, C, H, W)`` and ``y`` int64, are written to the cache (atomically;
   a cache that cannot be written is one warning, never a lost run) and memoised in the process.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import re
import sys
import tarfile
import warnings
import zipfile
from pathlib import Path

import numpy as np

from clsuite.data.files import DataError, file_md5

FORMAT = 1  # version of the cache layout and of the decoding steps: bump it when either changes
SPLITS = ("train", "test")
MODES = {1: "L", 3: "RGB"}  # image_folder.channels -> Pillow mode
_MEMO: dict[str, tuple] = {}  # cache key -> read-only arrays: the jobs of one process decode once


# ----------------------------------------------------------------------------- the archive


def options(benchmark: dict) -> dict:
    opts = benchmark.get("image_folder") or {}
    if not opts.get("path"):
        raise DataError(
            f"benchmark.image_folder.path is missing; benchmark.source={benchmark.get('source')} needs the "
            "archive (a folder, .tar or .tar.gz with train/<class>/* and test/<class>/*) relative to data.root"
        )
    return opts


def archive_files(benchmark: dict) -> list[str]:
    """The source's files for the config check and the run's identity: the archive alone."""
    return [str(options(benchmark)["path"])]


def checksum(path: str | Path) -> str:
    """md5 of a file; of a directory, md5 of its regular files' sorted ``<relative path> <md5>``
    lines (each file hashed once per process: ``clsuite.data.files.file_md5``)."""
    path = Path(path)
    if not path.is_dir():
        return file_md5(path)
    lines = sorted(f"{p.relative_to(path).as_posix()} {file_md5(p)}\n" for p in path.rglob("*") if p.is_file())
    return hashlib.md5("".join(lines).encode()).hexdigest()


def decoder() -> str:
    """What decodes the images: ``Pillow <v> (libjpeg-turbo <v>)`` (in the run's data identity)."""
    import PIL
    from PIL import features

    jpeg = features.version("libjpeg_turbo")
    return f"Pillow {PIL.__version__}" + (f" (libjpeg-turbo {jpeg})" if jpeg else "")


def _natural(name: str) -> tuple:
    return tuple(int(s) if s.isdigit() else s for s in re.split(r"(\d+)", name))


def _members(path: Path):
    """(member name, bytes) of every regular file of a directory or a tar (.gz): read in stream order."""
    if path.is_dir():
        for p in sorted(path.rglob("*")):
            if p.is_file():
                yield p.relative_to(path).as_posix(), p.read_bytes()
        return
    try:
        with tarfile.open(path, "r:*") as tar:
            for m in tar:
                if m.isfile():
                    f = tar.extractfile(m)
                    yield m.name, f.read() if f is not None else b""
    except (tarfile.TarError, OSError, EOFError) as e:
        raise DataError(f"unreadable image-folder archive {path}: {e}") from None


def _listing(path: Path) -> dict[str, dict[str, list[tuple[str, bytes]]]]:
    """{split: {class: [(file name, bytes), ...]}} of the archive, with one common prefix."""
    out: dict[str, dict[str, list]] = {s: {} for s in SPLITS}
    prefixes = set()
    for name, data in _members(path):
        parts = name.strip("/").split("/")
        if len(parts) < 3 or parts[-3] not in SPLITS or any(p.startswith(".") for p in parts[-3:]):
            continue
        prefixes.add("/".join(parts[:-3]))
        out[parts[-3]].setdefault(parts[-2], []).append((parts[-1], data))
    if len(prefixes) > 1:
        shown = ", ".join(repr(p) for p in sorted(prefixes)[:3])
        raise DataError(f"image-folder archive {path} has train/ and test/ under several folders ({shown}); keep one")
    for s in SPLITS:
        if not out[s]:
            raise DataError(f"image-folder archive {path} has no {s}/<class>/<image> files")
    if sorted(out["train"]) != sorted(out["test"]):
        only = sorted(set(out["train"]) ^ set(out["test"]))
        raise DataError(f"image-folder archive {path}: train/ and test/ hold different classes ({', '.join(only[:5])})")
    return out


def decode(path: Path, channels: int):
    """(x_train, y_train, x_test, y_test, class names) of the archive, decoded with Pillow."""
    from PIL import Image, UnidentifiedImageError

    listing = _listing(path)
    classes = sorted(listing["train"])
    arrays, shape = [], None
    for split in SPLITS:
        xs, ys = [], []
        for label, c in enumerate(classes):
            for fname, data in sorted(listing[split][c], key=lambda m: _natural(m[0])):
                where = f"{path}: {split}/{c}/{fname}"
                try:
                    with Image.open(io.BytesIO(data)) as im:
                        a = np.asarray(im.convert(MODES[channels]), dtype=np.uint8)
                except (UnidentifiedImageError, OSError, ValueError) as e:
                    raise DataError(f"undecodable image {where}: {e}") from None
                a = a[None] if a.ndim == 2 else a.transpose(2, 0, 1)
                if shape is None:
                    shape = a.shape
                elif a.shape != shape:
                    raise DataError(
                        f"image {where} is {a.shape[1:]} (H, W), the first one {shape[1:]}: one size needed"
                    )
                xs.append(a)
                ys.append(label)
        arrays += [np.stack(xs), np.asarray(ys, dtype=np.int64)]
    return (*arrays, classes)


# ----------------------------------------------------------------------------- the cache


def cache_root(configured: str | None = None) -> Path:
    """``data.cache_dir``, else ``$CLSUITE_CACHE_DIR``, else ``$XDG_CACHE_HOME/clsuite``, else ``~/.cache/clsuite``."""
    if configured:
        return Path(configured).expanduser()
    if os.environ.get("CLSUITE_CACHE_DIR"):
        return Path(os.environ["CLSUITE_CACHE_DIR"]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "clsuite"


def cache_file(cache_dir: str | None, digest: str, channels: int) -> Path:
    key = hashlib.sha256(f"{digest}|{channels}|{decoder()}|{FORMAT}".encode()).hexdigest()[:12]
    return cache_root(cache_dir) / "image_folder" / f"{digest}-{key}.npz"


def _load_cached(path: Path, channels: int):
    """The cached arrays, or None when the file is absent, unreadable or not what this reader writes."""
    if not path.is_file():
        return None
    try:
        with np.load(path, allow_pickle=False) as z:
            xtr, ytr, xte, yte, classes = (z[k] for k in ("xtr", "ytr", "xte", "yte", "classes"))
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as e:
        warnings.warn(f"image-folder cache {path} unreadable ({e}); decoding again", stacklevel=2)
        return None
    ok = all(x.dtype == np.uint8 and x.ndim == 4 and x.shape[1] == channels for x in (xtr, xte))
    ok = ok and all(y.dtype == np.int64 and y.ndim == 1 for y in (ytr, yte))
    ok = ok and len(xtr) == len(ytr) and len(xte) == len(yte) and xtr.shape[1:] == xte.shape[1:]
    if not ok:
        warnings.warn(f"image-folder cache {path} is not a cache of this reader; decoding again", stacklevel=2)
        return None
    return xtr, ytr, xte, yte, [str(c) for c in classes]


def _store(path: Path, arrays) -> None:
    xtr, ytr, xte, yte, classes = arrays
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(tmp, "wb") as f:
            np.savez(f, xtr=xtr, ytr=ytr, xte=xte, yte=yte, classes=np.asarray(classes, dtype=str))
        os.replace(tmp, path)
    except OSError as e:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        warnings.warn(f"image-folder cache not written ({path}: {e.strerror or e}); the run goes on", stacklevel=2)


# ----------------------------------------------------------------------------- the reader


def read_image_folder(root, benchmark: dict, *, download: bool, verify: bool, cache_dir: str | None = None):
    """(x_train, y_train, x_test, y_test) of ``benchmark.image_folder`` under ``root`` (steps 1-5 above)."""
    opts = options(benchmark)
    path = Path(root) / str(opts["path"])
    if not path.exists():
        how = "download" if download else "get"
        raise DataError(
            f"missing image-folder archive {path} (benchmark.image_folder.path={opts['path']} under data.root="
            f"{root}); this source cannot {how} it: put the folder or .tar(.gz) there, or set DATA_DIR / data.root"
        )
    digest = checksum(path)
    expected = opts.get("md5")
    if verify and expected and digest != expected:
        raise DataError(f"corrupted data file {path}: md5 {digest}, expected {expected} (benchmark.image_folder.md5)")
    channels = int(opts.get("channels", 3))
    if channels not in MODES:
        raise DataError(f"benchmark.image_folder.channels must be one of 1, 3, got {channels}")
    target = cache_file(cache_dir, digest, channels)
    key = str(target.name)
    if key not in _MEMO:
        arrays = _load_cached(target, channels)
        if arrays is None:
            print(f"decoding {path} (once, cached in {target.parent})", file=sys.stderr, flush=True)
            arrays = decode(path, channels)
            _store(target, arrays)
        for a in arrays[:4]:
            a.flags.writeable = False
        _MEMO[key] = arrays
    xtr, ytr, xte, yte, classes = _MEMO[key]
    _check_sizes(path, opts, ytr, classes)
    return xtr, ytr, xte, yte


def _check_sizes(path: Path, opts: dict, ytr, classes) -> None:
    want_c, want_n = opts.get("classes"), opts.get("train_per_class")
    smallest = int(np.bincount(ytr, minlength=len(classes)).min())
    if want_c is not None and int(want_c) != len(classes):
        raise DataError(
            f"image-folder archive {path} has {len(classes)} classes, benchmark.image_folder.classes={want_c}"
        )
    if want_n is not None and int(want_n) != smallest:
        raise DataError(
            f"image-folder archive {path}: its smallest training class has {smallest} images, "
            f"benchmark.image_folder.train_per_class={want_n}"
        )
