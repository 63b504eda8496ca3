"""Image-folder archives: ``train/<class>/<image>`` and ``test/<class>/<image>``, decoded once.

The reader of source ``image_folder`` (registered in ``clsuite.core.data.sources``; docs/DEVELOPING.md,
"Your own images": the layout, the member rule, the cache). The config check runs it before any
folder is made (:func:`check`); the run reuses its arrays. Steps of :func:`read_image_folder`:

1. The archive ``<data.root>/<image_folder.path>`` (a directory, a ``.tar`` or ``.tar.gz``), its
   checksum (:func:`checksum`: of a directory, the md5 of its files' sorted ``<path> <md5>`` lines),
   checked against ``image_folder.md5`` when given and ``data.verify_md5``.
2. The disk cache (:func:`cache_file`): ``<cache dir>/image_folder/<checksum>-<key>.npz``, ``key``
   hashing the channels, the decoder and :data:`FORMAT`; it holds the arrays and their sha256
   (:func:`content_sha256`), checked on load: a file that fails is a warning and is decoded again.
3. Otherwise the members ``[<prefix>/](train|test)/<class>/<file>`` are read by the member rule
   (:func:`_folder_files`, :func:`_tar_target`: a link to a file inside the archive is that file,
   every other link or special member there a ``DataError`` naming it), labelled by the sorted
   class names, in natural file order, and decoded with Pillow to ``image_folder.channels``.
4. The class count and the smallest training class are checked against the benchmark's sizes.
5. The arrays and their sha256 are written to the cache (atomically, through a temporary file
   naming its host and pid: one whose writer is gone is removed at the next look-up) and
   memoised; the sha256 is the run's ``data.decoded`` (:func:`decoded_sha256`).
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import posixpath
import re
import socket
import stat
import sys
import tarfile
import warnings
import zipfile
from pathlib import Path

import numpy as np

from clsuite.core.data.files import DataError, file_md5, kind, open_regular

FORMAT = 2  # version of the cache layout and of the decoding steps: bump it when either changes
SPLITS = ("train", "test")
MODES = {1: "L", 3: "RGB"}  # image_folder.channels -> Pillow mode
MAX_IMAGE_BYTES = 1 << 28  # one image file: what is read for it at most (a tar.gz member may claim any size)
HOST = socket.gethostname()  # a cache write's temporary file names its host and process
_MEMO: dict[str, tuple] = {}  # cache key -> (4 arrays, classes, sha256): the jobs of one process decode once


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
    """md5 of a file; of a directory, md5 of its files' sorted ``<relative path> <md5>`` lines (the
    files :func:`_folder_files` lists; each hashed once per process: ``clsuite.core.data.files.file_md5``)."""
    path = Path(path)
    if not path.is_dir():
        return file_md5(path)
    lines = [f"{name} {file_md5(p)}\n" for name, p in _folder_files(path)]
    return hashlib.md5("".join(lines).encode()).hexdigest()


def decoder() -> str:
    """What decodes the images: ``Pillow <v> (libjpeg-turbo <v>)`` (in the run's data identity)."""
    import PIL
    from PIL import features

    jpeg = features.version("libjpeg_turbo")
    return f"Pillow {PIL.__version__}" + (f" (libjpeg-turbo {jpeg})" if jpeg else "")


def _natural(name: str) -> tuple:
    return tuple(int(s) if s.isdigit() else s for s in re.split(r"(\d+)", name))


def _image(name: str) -> tuple[str, str, str, str] | None:
    """(prefix, split, class, file) of a member the layout reads, else None (an ignored member)."""
    parts = name.split("/")
    if len(parts) < 3 or parts[-3] not in SPLITS or any(p.startswith(".") for p in parts[-3:]):
        return None
    return "/".join(parts[:-3]), parts[-3], parts[-2], parts[-1]


def _on_layout(name: str) -> bool:
    """Whether a member is an image of the layout or a split or class folder on its way: there a
    link is followed by the member rule and any other kind of member refused; elsewhere, ignored."""
    tail = name.split("/")[-3:]
    return not any(p.startswith(".") for p in tail) and any(p in SPLITS for p in tail)


def _folder_files(path: Path) -> list[tuple[str, Path]]:
    """(name, regular file) of every file of a folder archive, sorted by name: a link on the layout
    is read as its target (:func:`_follow`), other links and special files are ignored, never opened."""
    base = Path(os.path.realpath(path))

    def unreadable(e: OSError):
        raise DataError(f"unreadable image-folder archive {path}: {e.strerror or e}: {e.filename}")

    out = []
    for top, dirs, files in os.walk(base, onerror=unreadable):  # (links to folders: listed, not entered)
        for entry in (*dirs, *files):
            p = Path(top, entry)
            name = p.relative_to(base).as_posix()
            try:
                mode = os.lstat(p).st_mode
            except OSError as e:
                unreadable(e)
            if stat.S_ISREG(mode):
                out.append((name, p))
            elif not stat.S_ISDIR(mode) and _on_layout(name):
                out.append((name, _follow(path, name, base, p, mode)))
    return sorted(out)


def _follow(path: Path, name: str, base: Path, p: Path, mode: int) -> Path:
    """The regular file inside the folder ``base`` that the link ``p`` names (the member rule), else
    ``DataError`` naming the member."""
    where = f"image-folder archive {path}: member {name}"
    if not stat.S_ISLNK(mode):
        raise DataError(f"{where} is a {kind(mode)}, not an image file or a folder")
    link, target = os.readlink(p), Path(os.path.realpath(p))
    if not target.is_relative_to(base):
        raise DataError(f"{where} is a link to {link}, outside the archive; copy the file in")
    try:
        target_mode = os.stat(target).st_mode
    except OSError:
        raise DataError(f"{where} is a link to {link}, which does not exist") from None
    if not stat.S_ISREG(target_mode):
        raise DataError(f"{where} is a link to {link}, a {kind(target_mode)}, not an image file")
    return target


def _tar_target(path: Path, name: str, m: tarfile.TarInfo, members: dict) -> tarfile.TarInfo:
    """The regular member that the link member ``m`` names, through links (the member rule), else
    ``DataError``: a symbolic link's target is relative to its folder, a hard link's to the archive."""
    where = f"image-folder archive {path}: member {name}"
    for _ in range(40):  # (a loop of links ends here)
        base = posixpath.dirname(posixpath.normpath(m.name)) if m.issym() else ""
        target = posixpath.normpath(posixpath.join(base, m.linkname))
        if m.linkname.startswith("/") or target == ".." or target.startswith("../"):
            raise DataError(f"{where} is a link to {m.linkname}, outside the archive; make the tar with -h")
        if target not in members:
            raise DataError(f"{where} is a link to {m.linkname}, which the archive does not hold")
        m = members[target]
        if m.isfile():
            return m
        if not (m.issym() or m.islnk()):
            raise DataError(f"{where} is a link to {m.name}, a {_tar_kind(m)}, not an image file")
    raise DataError(f"{where} is a loop of links")


def _tar_kind(m: tarfile.TarInfo) -> str:
    return _TAR_KINDS.get(m.type, "special member")


_TAR_KINDS = {tarfile.DIRTYPE: "folder", tarfile.FIFOTYPE: "FIFO", tarfile.CHRTYPE: "character device",
              tarfile.BLKTYPE: "block device"}  # fmt: skip


def _member_name(path: Path, raw: str) -> str:
    name = posixpath.normpath(raw)
    if raw.startswith("/") or name == ".." or name.startswith("../"):
        raise DataError(f"image-folder archive {path}: member {raw} is named outside the archive (absolute or ..)")
    return name


def _bounded(path: Path, name: str, size: int) -> None:
    if size > MAX_IMAGE_BYTES:
        raise DataError(
            f"image-folder archive {path}: member {name} is {size} bytes; an image is read up to {MAX_IMAGE_BYTES}"
        )


def _members(path: Path):
    """(member name, bytes) of every image of the layout in a directory or a tar (.gz), by the
    member rule (module docstring, step 3): a tar is read in stream order, its links last."""
    if path.is_dir():
        for name, p in _folder_files(path):
            if _image(name):
                with open_regular(p) as f:
                    _bounded(path, name, os.fstat(f.fileno()).st_size)
                    yield name, f.read()
        return
    opened = False
    try:
        with open_regular(path) as f, tarfile.open(fileobj=f, mode="r:*") as tar:
            opened, links = True, []
            for m in tar:
                name = _member_name(path, m.name)
                if m.isdir() or not _on_layout(name):
                    continue
                if m.isfile() and _image(name):
                    _bounded(path, name, m.size)
                    yield name, tar.extractfile(m).read()
                elif m.issym() or m.islnk():
                    links.append((name, m))
                elif not m.isfile():
                    raise DataError(
                        f"image-folder archive {path}: member {name} is a {_tar_kind(m)}, not an image file"
                    )
            tar.fileobj.seek(tar.offset)  # where the members stopped: tar's end-of-archive block, or a cut
            if tar.fileobj.read(tarfile.BLOCKSIZE) != tarfile.NUL * tarfile.BLOCKSIZE:
                raise DataError(f"image-folder archive {path} is truncated: it ends without tar's end-of-archive block")
            members = {posixpath.normpath(m.name): m for m in tar.getmembers()}  # a name's last, as tar extracts
            targets = [(name, _tar_target(path, name, m, members)) for name, m in links]
            for name, target in sorted(targets, key=lambda t: t[1].offset_data):  # (a .tar.gz: one pass)
                _bounded(path, name, target.size)
                yield name, tar.extractfile(target).read()
    except (tarfile.TarError, OSError, EOFError) as e:
        reason = e if opened else "not a tar archive (plain, gzip, bzip2 or xz)"
        raise DataError(f"unreadable image-folder archive {path}: {reason}") from None


def _listing(path: Path) -> dict[str, dict[str, list[tuple[str, bytes]]]]:
    """{split: {class: [(file name, bytes), ...]}} of the archive, with one common prefix."""
    out: dict[str, dict[str, list]] = {s: {} for s in SPLITS}
    prefixes, seen = set(), set()
    for name, data in _members(path):
        if (parts := _image(name)) is None:
            continue
        if name in seen:
            raise DataError(f"image-folder archive {path} holds member {name} twice; keep one")
        seen.add(name)
        prefix, split, cls, fname = parts
        prefixes.add(prefix)
        out[split].setdefault(cls, []).append((fname, data))
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
                except (UnidentifiedImageError, Image.DecompressionBombError, OSError, ValueError) as e:
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


def content_sha256(arrays) -> str:
    """sha256 of (x_train, y_train, x_test, y_test, class names): each array's dtype, shape and
    bytes, then the names; stored beside them in the cache, and the run's ``data.decoded``."""
    h = hashlib.sha256()
    for a in arrays[:4]:
        a = np.ascontiguousarray(a)
        h.update(f"{a.dtype.str} {a.shape}\n".encode())
        h.update(a)
    h.update("\n".join(arrays[4]).encode())
    return h.hexdigest()


# ----------------------------------------------------------------------------- the cache


def cache_root(configured: str | None = None) -> Path:
    """``data.cache_dir``, else ``$XDG_CACHE_HOME/clsuite``, else ``~/.cache/clsuite``."""
    if configured:
        return Path(configured).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "clsuite"


def cache_file(cache_dir: str | None, digest: str, channels: int) -> Path:
    key = hashlib.sha256(f"{digest}|{channels}|{decoder()}|{FORMAT}".encode()).hexdigest()[:12]
    return cache_root(cache_dir) / "image_folder" / f"{digest}-{key}.npz"


_KEYS = ("xtr", "ytr", "xte", "yte", "classes", "sha256")


def _load_cached(path: Path, channels: int):
    """The cached arrays, class names and sha256, or None when the file is absent, unreadable, not
    what this reader writes, or its arrays do not hash to the sha256 stored with them."""
    if not os.path.lexists(path):
        return None
    try:
        with open_regular(path) as f, np.load(f, allow_pickle=False) as z:
            xtr, ytr, xte, yte, classes, digest = (z[k] for k in _KEYS)
    except (DataError, OSError, ValueError, KeyError, EOFError, MemoryError, zipfile.BadZipFile) as e:
        warnings.warn(f"image-folder cache {path} unreadable ({e}); decoding again", stacklevel=2)
        return None
    ok = all(x.dtype == np.uint8 and x.ndim == 4 and x.shape[1] == channels for x in (xtr, xte))
    ok = ok and all(y.dtype == np.int64 and y.ndim == 1 for y in (ytr, yte)) and digest.shape == ()
    ok = ok and len(xtr) == len(ytr) and len(xte) == len(yte) and xtr.shape[1:] == xte.shape[1:]
    if not ok:
        warnings.warn(f"image-folder cache {path} is not a cache of this reader; decoding again", stacklevel=2)
        return None
    arrays = (xtr, ytr, xte, yte, [str(c) for c in classes])
    if content_sha256(arrays) != str(digest):
        warnings.warn(f"image-folder cache {path}: its arrays do not match their sha256; decoding again", stacklevel=2)
        return None
    return (*arrays, str(digest))


def _writer_gone(host: str | None, pid: int) -> bool:
    """Whether the process that named a temporary file is gone: this host's only (another host's
    is left to it); a file without a host (written before temporary names held one) counts as this host's."""
    if host not in (None, HOST):
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:  # (another user's live process)
        return False
    return False


def _remove_stale(folder: Path) -> None:
    """Remove the temporary files of cache writes whose writer is gone (killed mid-write)."""
    with contextlib.suppress(OSError):
        for n in os.listdir(folder):
            m = re.fullmatch(r"\.(.+\.npz)(?:\.(.+))?\.(\d+)\.tmp", n)
            if m and _writer_gone(m[2], int(m[3])):
                with contextlib.suppress(OSError):
                    (folder / n).unlink()


def _store(path: Path, entry) -> None:
    xtr, ytr, xte, yte, classes, digest = entry
    tmp = path.with_name(f".{path.name}.{HOST}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(tmp, "wb") as f:
            classes = np.asarray(classes, dtype=str)
            np.savez(f, xtr=xtr, ytr=ytr, xte=xte, yte=yte, classes=classes, sha256=np.asarray(digest))
        os.replace(tmp, path)
    except OSError as e:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        warnings.warn(f"image-folder cache not written ({path}: {e.strerror or e}); the run goes on", stacklevel=2)


# ----------------------------------------------------------------------------- the reader


def read_image_folder(root, benchmark: dict, *, download: bool, verify: bool, cache_dir: str | None = None):
    """(x_train, y_train, x_test, y_test) of ``benchmark.image_folder`` under ``root`` (steps 1-5 above)."""
    return _read(root, benchmark, download, verify, cache_dir)[:4]


def decoded_sha256(root, benchmark: dict, *, verify: bool, download: bool = False, cache_dir: str | None = None) -> str:
    """The sha256 of the arrays :func:`read_image_folder` returns (:func:`content_sha256`), read
    once per process: the run's data identity (``data.decoded``)."""
    return _read(root, benchmark, download, verify, cache_dir)[5]


def check(root, benchmark: dict, *, download: bool, verify: bool, cache_dir: str | None = None) -> None:
    """The config check: the read itself, so that every refusal of the archive, its members and its
    images comes before any folder is made (memoised: the run reads nothing again). This source
    cannot download: a missing archive is refused whatever ``data.download`` says."""
    _read(root, benchmark, download, verify, cache_dir)


def _read(root, benchmark: dict, download: bool, verify: bool, cache_dir: str | None) -> tuple:
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
        _remove_stale(target.parent)
        entry = _load_cached(target, channels)
        if entry is None:
            print(f"decoding {path} (once, cached in {target.parent})", file=sys.stderr, flush=True)
            arrays = decode(path, channels)
            entry = (*arrays, content_sha256(arrays))
            _store(target, entry)
        for a in entry[:4]:
            a.flags.writeable = False
        _MEMO[key] = entry
    entry = _MEMO[key]
    _check_sizes(path, opts, entry[1], entry[4])
    return entry


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
