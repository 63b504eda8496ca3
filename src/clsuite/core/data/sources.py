"""The data-source registry: a benchmark config's ``source`` names a reader registered here.

A benchmark is one file, ``conf/benchmark/<name>.yaml`` (its source, tasks, classes per task,
training samples per class, backbone); a new data *format* adds one reader, registered by name
with :func:`register`, with the sizes the config check needs before any file is read
(docs/DEVELOPING.md, "Adding a benchmark": ``classes``, ``train_per_class``, ``files``, ``folders``,
``downloads``, ``cached``, ``decoder``, ``check``, ``decoded``, and ``module:name`` for a reader outside
this package).

:func:`bind` is the one lookup of a benchmark's source: the registered :class:`Source` with the
benchmark config bound to it. Each entry binds once and hands it down: the config check
(``clsuite.config.schema.check``: its sizes; ``clsuite.config.check.validate``: its files, :meth:`Source.check_files`)
and the run's build (``clsuite.core.train.build``: the data module reads through :meth:`Source.read`,
the run's data identity hashes :meth:`Source.file_list` and records :meth:`Source.decoded_sha256`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from clsuite.core.data import files as F
from clsuite.core.data import imagefolder as IF
from clsuite.core.errors import ConfigError, import_outside

Reader = Callable[..., tuple]  # (root, benchmark: dict, *, download, verify[, cache_dir]) -> 4 arrays


@dataclass(frozen=True)
class Source:
    name: str
    reader: Reader
    classes: int | str  # classes in the data (or the benchmark key that holds the number)
    train_per_class: int | str  # training samples of its smallest class (or the key)
    files: Callable[[dict], list[str]] | None  # data files under data.root; None: generated data
    folders: bool = False  # an entry of files may be a folder
    downloads: bool = False  # with data.download=true the reader fetches the files not there
    cached: bool = False  # the reader takes cache_dir= (data.cache_dir)
    decoder: Callable[[], str] | None = None  # what decodes the files (the data identity records it)
    check: Callable[..., object] | None = None  # (root, benchmark, *, download, verify[, cache_dir]): DataError
    decoded: Callable[..., str] | None = None  # (root, benchmark, *, download, verify[, cache_dir]): arrays' sha256
    benchmark: dict | None = None  # bound (:func:`bind`): the resolved benchmark config, the reader's options

    def file_list(self) -> list[str]:
        """The files the bound benchmark reads, relative to ``data.root`` (none: generated data)."""
        return [] if self.files is None else list(self.files(self.benchmark))

    def digests(self, root) -> dict[str, str | None]:
        """The md5 of each file the bound benchmark reads (:meth:`file_list`), by its name under ``root``; a
        folder of a source that reads folders: the md5 of its files' (path, md5) lines
        (``clsuite.core.data.imagefolder.checksum``); None where it is absent. The run's data identity."""
        found = {}
        for rel in self.file_list():
            path = Path(root) / rel
            found[rel] = (
                F.file_md5(path) if path.is_file() else IF.checksum(path) if self.folders and path.is_dir() else None
            )
        return found

    def read(self, root, download: bool, verify: bool, cache_dir: str | None = None):
        """(x_train, y_train, x_test, y_test) of the bound benchmark."""
        return self.reader(Path(root), self.benchmark, **self._options(download, verify, cache_dir))

    def check_files(self, root, download: bool, verify: bool, cache_dir: str | None = None) -> None:
        """The files' checks that need their content (md5; an image-folder archive: its read), run by
        ``clsuite.config.check.validate`` before any folder is made: ``DataError``. Memoised in the process,
        so the run pays none of it again."""
        if self.check is not None:
            self.check(Path(root), self.benchmark, **self._options(download, verify, cache_dir))

    def decoded_sha256(self, root, download: bool, verify: bool, cache_dir: str | None = None) -> str | None:
        """The sha256 of the arrays as read, for a source that keeps decoded arrays between runs (a
        cache a file's md5 does not cover): the run's ``data.decoded``; None for the others."""
        if self.decoded is None:
            return None
        return self.decoded(Path(root), self.benchmark, **self._options(download, verify, cache_dir))

    def _options(self, download: bool, verify: bool, cache_dir: str | None) -> dict:
        return {"download": download, "verify": verify, **({"cache_dir": cache_dir} if self.cached else {})}


SOURCES: dict[str, Source] = {}


def register(
    name: str,
    *,
    classes: int | str,
    train_per_class: int | str,
    files=None,
    folders=False,
    downloads=False,
    cached=False,
    decoder=None,
    check=None,
    decoded=None,
):
    """Decorator: register ``reader`` under ``name`` (a second registration of a name replaces it)."""

    def deco(reader: Reader) -> Reader:
        spec = files if files is None or callable(files) else (lambda b, fs=tuple(files): list(fs))
        SOURCES[name] = Source(
            name, reader, classes, train_per_class, spec, folders, downloads, cached, decoder, check, decoded
        )
        return reader

    return deco


def get(source: str) -> Source:
    """The registered source ``name`` or ``module:name`` (the module is imported first: it registers it)."""
    module, _, name = str(source).rpartition(":")
    if module and import_outside(module, f"benchmark.source {source!r}") is None:
        raise ConfigError(f"benchmark.source {source!r}: cannot import {module!r} (no module of that name)")
    if name not in SOURCES:
        raise ConfigError(
            f"unknown benchmark.source {source!r}; valid choices: {', '.join(SOURCES)} "
            "(or module:name of a reader registered with clsuite.core.data.sources.register)"
        )
    return SOURCES[name]


def bind(benchmark: dict) -> Source:
    """The source of ``benchmark`` (a resolved benchmark config) with it bound: the one lookup."""
    return replace(get(benchmark["source"]), benchmark=benchmark)


# ----------------------------------------------------------------------------- the suite's own sources
# Sizes (PROTOCOL section 1): classes, and training samples of the smallest class.

for _names, _load, _check in (
    ((("MNIST", 10, 5421), ("FashionMNIST", 10, 6000)), F.load_mnist_like, F.check_mnist_like),
    ((("cifar10", 10, 5000), ("cifar100", 100, 500)), F.load_cifar, F.check_cifar),
):
    for _name, _classes, _smallest in _names:
        register(
            _name,
            classes=_classes,
            train_per_class=_smallest,
            files=F.source_files(_name),
            downloads=True,
            check=lambda root, b, *, download, verify, _n=_name, _c=_check: _c(
                root, _n, verify=verify, download=download
            ),
        )(lambda root, b, *, download, verify, _n=_name, _l=_load: _l(root, _n, download=download, verify=verify))


# Image-folder archives (train/<class>/*, test/<class>/*; a folder, .tar or .tar.gz), decoded with
# Pillow, cached on disk by checksum: a user's own image data set, and CIFAR-10's JPEG copy.
register(
    "image_folder",
    classes="image_folder.classes",
    train_per_class="image_folder.train_per_class",
    files=IF.archive_files,
    folders=True,
    cached=True,
    decoder=IF.decoder,
    check=IF.check,
    decoded=IF.decoded_sha256,
)(IF.read_image_folder)


@register("synthetic", classes="synthetic.num_classes", train_per_class="synthetic.train_per_class")
def read_synthetic(root, benchmark, *, download, verify):
    """Learnable Gaussian clusters (:func:`make_synthetic`), no files."""
    return make_synthetic(**(benchmark.get("synthetic") or {}))


def make_synthetic(num_classes=10, shape=(1, 8, 8), train_per_class=60, test_per_class=20, seed=0, noise=0.35):
    """Learnable Gaussian clusters as uint8 images: one prototype per class."""
    rng = np.random.default_rng(seed)
    protos = rng.uniform(0, 1, size=(num_classes, *shape))

    def draw(n):
        y = np.repeat(np.arange(num_classes), n)
        x = protos[y] + noise * rng.standard_normal((len(y), *shape))
        return (np.clip(x, 0, 1) * 255).astype(np.uint8), y.astype(np.int64)

    xtr, ytr = draw(train_per_class)
    xte, yte = draw(test_per_class)
    return xtr, ytr, xte, yte
