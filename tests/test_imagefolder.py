"""The image-folder reader (clsuite.data.imagefolder, source ``image_folder``) on tiny archives made
here: exact pixels (PNG: lossless) and labels in their documented order, from a folder, a .tar and a
.tar.gz; the disk cache keyed by the archive's checksum (a hit decodes nothing); its checks; the
run's data identity; and the benchmark ``split_cifar10_jpeg`` that uses it."""

from __future__ import annotations

import io
import os
import tarfile
import zlib
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from clsuite import api, identity
from clsuite.config import ConfigError
from clsuite.data import imagefolder as IF
from clsuite.data import sources
from clsuite.data.files import DataError, md5
from tests.conftest import make_cfg

SHARED = Path(os.environ.get("CLSUITE_SHARED_DATA", Path(__file__).resolve().parents[2] / "shared" / "datasets"))
CLASSES = ("bee", "ant", "cat")  # written in this order; labels follow the sorted names: ant 0, bee 1, cat 2
FILES = {"train": ("10.png", "2.png", "1.png"), "test": ("b.png", "a.png")}  # sorted: 1, 2, 10 / a, b


def pixels(split: str, cls: str, fname: str, size=(4, 5)) -> np.ndarray:
    """A distinct RGB image (H, W, 3) per (split, class, file): its values say where it came from."""
    rng = np.random.default_rng(zlib.crc32(f"{split}/{cls}/{fname}".encode()))
    return rng.integers(0, 256, size=(*size, 3), dtype=np.uint8)


def png(a: np.ndarray) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(a).save(buf, format="PNG")
    return buf.getvalue()


def members(size=(4, 5)) -> dict[str, bytes]:
    return {
        f"{split}/{c}/{f}": png(pixels(split, c, f, size))
        for split, names in FILES.items()
        for c in CLASSES
        for f in names
    }


def write_archive(path: Path, kind: str, files: dict[str, bytes]) -> Path:
    """``files`` as a folder, a .tar or a .tar.gz at ``path`` (+ suffix); a README beside train/ and test/."""
    files = {**files, "README.txt": b"not an image", "train/.DS_Store": b"x"}
    if kind == "dir":
        for name, data in files.items():
            (path / name).parent.mkdir(parents=True, exist_ok=True)
            (path / name).write_bytes(data)
        return path
    out = path.with_name(path.name + (".tar" if kind == "tar" else ".tar.gz"))
    out.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(out, "w" if kind == "tar" else "w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return out


def expected(split: str, size=(4, 5)):
    """The arrays the reader must return: classes sorted by name, files in natural order, (N, C, H, W)."""
    order = {"train": ("1.png", "2.png", "10.png"), "test": ("a.png", "b.png")}[split]
    xs = [pixels(split, c, f, size).transpose(2, 0, 1) for c in sorted(CLASSES) for f in order]
    ys = [label for label, _ in enumerate(sorted(CLASSES)) for _ in order]
    return np.stack(xs), np.asarray(ys, dtype=np.int64)


def bench(path: str, **opts) -> dict:
    spec = {"path": path, "classes": 3, "train_per_class": 3, "channels": 3, **opts}
    return {"source": "image_folder", "image_folder": spec}


def read(benchmark: dict, root, download: bool, verify: bool, cache_dir):
    """The benchmark's arrays, as the data module reads them (its source bound, then read)."""
    return sources.bind(benchmark).read(root, download, verify, cache_dir)


@pytest.fixture(autouse=True)
def fresh_memo():
    IF._MEMO.clear()
    yield
    IF._MEMO.clear()


@pytest.mark.parametrize("kind", ["dir", "tar", "tar.gz"])
def test_exact_pixels_labels_and_order(tmp_path, kind):
    arc = write_archive(tmp_path / "data" / "tiny", kind, members())
    xtr, ytr, xte, yte = read(bench(arc.name), tmp_path / "data", False, True, tmp_path / "cache")
    for (x, y), split in (((xtr, ytr), "train"), ((xte, yte), "test")):
        ex, ey = expected(split)
        assert x.dtype == np.uint8 and x.shape == ex.shape == (len(ey), 3, 4, 5)
        np.testing.assert_array_equal(x, ex)
        np.testing.assert_array_equal(y, ey)
        assert y.dtype == np.int64 and not x.flags.writeable  # shared read-only between the jobs of a process


def test_one_common_prefix_is_allowed_two_are_refused(tmp_path):
    arc = write_archive(tmp_path / "d" / "pre", "tar", {f"cifar/{k}": v for k, v in members().items()})
    xtr = read(bench(arc.name), tmp_path / "d", False, True, tmp_path / "c")[0]
    np.testing.assert_array_equal(xtr, expected("train")[0])
    both = {**{f"a/{k}": v for k, v in members().items()}, **{f"b/{k}": v for k, v in members().items()}}
    arc = write_archive(tmp_path / "d" / "two", "tar", both)
    with pytest.raises(DataError, match="under several folders"):
        read(bench(arc.name), tmp_path / "d", False, True, tmp_path / "c")


def test_grey_images_with_channels_1(tmp_path):
    arc = write_archive(tmp_path / "d" / "g", "tar", members())
    xtr, _, _, _ = read(bench(arc.name, channels=1), tmp_path / "d", False, True, tmp_path / "c")
    rgb = expected("train")[0].astype(np.float64)
    grey = (rgb[:, 0] * 299 + rgb[:, 1] * 587 + rgb[:, 2] * 114) / 1000  # Pillow's L conversion (ITU-R 601-2)
    assert xtr.shape == (9, 1, 4, 5)
    assert np.abs(xtr[:, 0].astype(int) - grey).max() <= 1


def test_the_cache_is_keyed_by_the_checksum_and_a_hit_decodes_nothing(tmp_path, monkeypatch):
    data, cache = tmp_path / "data", tmp_path / "cache"
    arc = write_archive(data / "tiny", "tar.gz", members())
    calls = []
    real = IF.decode
    monkeypatch.setattr(IF, "decode", lambda *a: calls.append(a) or real(*a))
    first = read(bench(arc.name), data, False, True, cache)
    (cached,) = (cache / "image_folder").glob("*.npz")
    assert cached.name.startswith(md5(arc) + "-") and len(calls) == 1
    IF._MEMO.clear()  # a new process: only the disk cache is left
    monkeypatch.setattr(IF, "decode", lambda *a: pytest.fail("decoded again despite the cache"))
    again = read(bench(arc.name), data, False, True, cache)
    for a, b in zip(first, again, strict=True):
        np.testing.assert_array_equal(a, b)
    # another archive (one pixel changed) has another checksum: a miss, decoded, a second cache file
    changed = members()
    a = pixels("train", "ant", "1.png")
    a[0, 0, 0] ^= 1
    changed["train/ant/1.png"] = png(a)
    arc2 = write_archive(data / "tiny2", "tar.gz", changed)
    monkeypatch.setattr(IF, "decode", lambda *a: calls.append(a) or real(*a))
    x2 = read(bench(arc2.name), data, False, True, cache)[0]
    assert len(calls) == 2 and len(list((cache / "image_folder").glob("*.npz"))) == 2
    assert x2[0, 0, 0, 0] == first[0][0, 0, 0, 0] ^ 1


def test_a_damaged_cache_file_is_decoded_again_and_replaced(tmp_path):
    data, cache = tmp_path / "data", tmp_path / "cache"
    arc = write_archive(data / "tiny", "tar", members())
    first = read(bench(arc.name), data, False, True, cache)
    (cached,) = (cache / "image_folder").glob("*.npz")
    cached.write_bytes(cached.read_bytes()[:100])
    IF._MEMO.clear()
    with pytest.warns(UserWarning, match="unreadable"):
        again = read(bench(arc.name), data, False, True, cache)
    np.testing.assert_array_equal(first[0], again[0])
    IF._MEMO.clear()
    np.testing.assert_array_equal(IF._load_cached(cached, 3)[0], first[0])  # rewritten whole


def test_an_unwritable_cache_is_a_warning_not_a_lost_run(tmp_path):
    data = tmp_path / "data"
    arc = write_archive(data / "tiny", "tar", members())
    blocker = tmp_path / "file"
    blocker.write_text("a file where the cache folder would be")
    with pytest.warns(UserWarning, match="cache not written"):
        x = read(bench(arc.name), data, False, True, blocker)[0]
    np.testing.assert_array_equal(x, expected("train")[0])


def test_the_cache_location(tmp_path, monkeypatch):
    monkeypatch.delenv("CLSUITE_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert IF.cache_root(None) == tmp_path / "xdg" / "clsuite"
    monkeypatch.setenv("CLSUITE_CACHE_DIR", str(tmp_path / "env"))
    assert IF.cache_root(None) == tmp_path / "env"
    assert IF.cache_root(str(tmp_path / "cfg")) == tmp_path / "cfg"  # data.cache_dir wins


def test_checks_md5_sizes_classes_and_image_sizes(tmp_path):
    data, cache = tmp_path / "data", tmp_path / "cache"
    arc = write_archive(data / "t", "tar", members())
    with pytest.raises(DataError, match=r"^corrupted data file .*t.tar: md5 [0-9a-f]{32}, expected 0+"):
        read(bench(arc.name, md5="0" * 32), data, False, True, cache)
    read(bench(arc.name, md5="0" * 32), data, False, False, cache)  # data.verify_md5=false
    read(bench(arc.name, md5=md5(arc)), data, False, True, cache)
    with pytest.raises(DataError, match=r"has 3 classes, benchmark\.image_folder\.classes=4$"):
        read(bench(arc.name, classes=4), data, False, True, cache)
    with pytest.raises(
        DataError, match=r"smallest training class has 3 images, benchmark\.image_folder\.train_per_class=2$"
    ):
        read(bench(arc.name, train_per_class=2), data, False, True, cache)
    with pytest.raises(DataError, match="missing image-folder archive"):
        read(bench("nope.tar"), data, False, True, cache)
    odd = {k: v for k, v in members().items() if not k.startswith("test/cat/")}
    with pytest.raises(DataError, match=r"train/ and test/ hold different classes \(cat\)"):
        read(bench(write_archive(data / "odd", "tar", odd).name), data, False, True, cache)
    sizes = {**members(), "train/cat/7.png": png(pixels("train", "cat", "7.png", (6, 5)))}
    with pytest.raises(DataError, match=r"train/cat/7.png is \(6, 5\) \(H, W\), the first one \(4, 5\)"):
        read(bench(write_archive(data / "sz", "tar", sizes).name), data, False, True, cache)
    bad = {**members(), "test/ant/c.png": b"not a png"}
    with pytest.raises(DataError, match=r"undecodable image .*test/ant/c\.png"):
        read(bench(write_archive(data / "bad", "tar", bad).name), data, False, True, cache)
    (data / "broken.tar.gz").write_bytes(b"\x1f\x8b garbage")
    with pytest.raises(DataError, match="unreadable image-folder archive"):
        read(bench("broken.tar.gz"), data, False, True, cache)


def test_directory_checksum_covers_names_and_contents(tmp_path):
    d = write_archive(tmp_path / "d", "dir", members())
    before = IF.checksum(d)
    (d / "train" / "ant" / "1.png").rename(d / "train" / "ant" / "3.png")
    renamed = IF.checksum(d)
    assert renamed != before
    (d / "train" / "ant" / "3.png").write_bytes(png(pixels("train", "ant", "3.png")))
    assert IF.checksum(d) not in (before, renamed)


# ----------------------------------------------------------------------------- as a benchmark

TINY = [
    "benchmark=split_cifar10_jpeg",
    "benchmark.image_folder.path=tiny.tar.gz",
    "benchmark.image_folder.md5=null",
    "benchmark.image_folder.classes=3",
    "benchmark.image_folder.train_per_class=3",
    "benchmark.n_tasks=1",
    "benchmark.classes_per_task=2",
    "model=mlp",
    "method=er",
    "reading=paper_text",
    "memory=4",
    "batch_size=2",
    "replay_size=2",
    "logger=none",
    "trainer=cpu",
    "trainer.progress_bar=false",
]


def test_a_run_on_an_archive_records_its_md5_and_decoder_and_uses_data_cache_dir(tmp_path):
    data = tmp_path / "data"
    arc = write_archive(data / "tiny", "tar.gz", members())
    ov = [*TINY, f"data.root={data}", f"data.cache_dir={tmp_path / 'cache'}"]
    res = api.run(ov, tmp_path / "run")
    assert res["benchmark"] == "split_cifar10_jpeg" and np.asarray(res["R"]).shape == (1, 1)
    assert res["identity"]["data"] == {"files": {"tiny.tar.gz": md5(arc)}, "decoder": IF.decoder()}
    assert IF.decoder().startswith("Pillow ")
    assert len(list((tmp_path / "cache" / "image_folder").glob(f"{md5(arc)}-*.npz"))) == 1
    # where the cache lives changes no result: not part of the identity
    a = identity.normalize(make_cfg(*ov))
    b = identity.normalize(make_cfg(*ov[:-1], "data.cache_dir=/elsewhere"))
    assert a == b and "cache_dir" not in a["data"]


def test_a_folder_is_an_archive_too_and_its_identity_is_the_tree_md5(tmp_path):
    data = tmp_path / "data"
    d = write_archive(data / "tree", "dir", members())
    ov = [*TINY, "benchmark.image_folder.path=tree", f"data.root={data}", f"data.cache_dir={tmp_path / 'c'}"]
    api.compose(ov)  # the config check accepts a folder for this source (a folder of MNIST files is refused)
    assert identity.data_identity(make_cfg(*ov))["files"] == {"tree": IF.checksum(d)}


def test_split_cifar10_jpeg_is_its_own_benchmark_and_split_cifar10_unchanged(tmp_path):
    jpeg, official = make_cfg("benchmark=split_cifar10_jpeg").benchmark, make_cfg("benchmark=split_cifar10").benchmark
    assert (jpeg.name, jpeg.source, official.name, official.source) == (
        "split_cifar10_jpeg",
        "image_folder",
        "split_cifar10",
        "cifar10",
    )
    for k in ("n_tasks", "classes_per_task", "train_per_class", "backbone", "iters_per_batch"):
        assert jpeg[k] == official[k], k
    assert jpeg.image_folder.md5 == "0d11abded7da73ed95b60c470137a5e6"  # ../shared/datasets/README.md
    assert sources.bind(dict(jpeg)).file_list() == ["CIFAR10-jpeg/cifar10-jpeg.tar.gz"]
    with pytest.raises(ConfigError, match=r"^unknown benchmark.image_folder.channels 2; valid choices: 1, 3$"):
        api.compose(["benchmark=split_cifar10_jpeg", "benchmark.image_folder.channels=2", f"data.root={tmp_path}"])


OFFICIAL_ORDER = ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck")


@pytest.mark.slow
@pytest.mark.skipif(
    not (SHARED / "CIFAR10-jpeg" / "cifar10-jpeg.tar.gz").is_file(), reason="no CIFAR-10 JPEG copy here"
)
def test_the_shared_cifar10_jpeg_copy(tmp_path):
    """The real archive: 5,000 / 1,000 images per class in the official label order, the README's
    channel means (to 3 decimals), the md5 check."""
    b = dict(make_cfg("benchmark=split_cifar10_jpeg").benchmark)
    xtr, ytr, xte, yte = read(b, SHARED, False, True, tmp_path)
    assert xtr.shape == (50000, 3, 32, 32) and xte.shape == (10000, 3, 32, 32)
    assert np.bincount(ytr).tolist() == [5000] * 10 and np.bincount(yte).tolist() == [1000] * 10
    (arrays,) = IF._MEMO.values()
    assert arrays[4] == list(OFFICIAL_ORDER)
    np.testing.assert_allclose((xtr / 255.0).mean((0, 2, 3)), [0.4913, 0.4821, 0.4465], atol=6e-4)
    np.testing.assert_allclose((xte / 255.0).mean((0, 2, 3)), [0.4941, 0.4851, 0.4504], atol=6e-4)
