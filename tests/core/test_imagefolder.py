"""The image-folder reader (clsuite.core.data.imagefolder, source ``image_folder``) on tiny archives made
here: exact pixels (PNG: lossless) and labels in their documented order, from a folder, a .tar and a
.tar.gz; the member rule (links, special members) in both kinds; the disk cache keyed by the
archive's checksum (a hit decodes nothing) and checked against its arrays' sha256; its checks, made
before any run folder; the run's data identity; and the benchmark ``split_cifar10_jpeg`` that uses it."""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
import tarfile
import zlib
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from clsuite import api
from clsuite.config.check import ConfigError
from clsuite.config.home import data_dir
from clsuite.core.data import imagefolder as IF
from clsuite.core.data import sources
from clsuite.core.data.files import DataError, md5
from clsuite.run import identity
from tests.conftest import make_cfg

SHARED = Path(data_dir())  # $DATA_DIR, else ../shared/datasets (clsuite.config.home)
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


def rewrite(cached: Path, **changed) -> None:
    """Rewrite the cache file with some arrays changed, every other entry as it was."""
    with np.load(cached) as z:
        entries = {k: z[k] for k in z.files}
    np.savez(cached, **{**entries, **changed})


def test_a_cache_file_whose_arrays_are_not_their_sha256_is_decoded_again(tmp_path):
    """A well-formed cache file with shifted labels was trained on under the archive's identity."""
    data, cache = tmp_path / "data", tmp_path / "cache"
    arc = write_archive(data / "tiny", "tar", members())
    read(bench(arc.name), data, False, True, cache)
    (cached,) = (cache / "image_folder").glob("*.npz")
    with np.load(cached) as z:
        rewrite(cached, ytr=(z["ytr"] + 1) % 3)
    IF._MEMO.clear()
    with pytest.warns(UserWarning, match=r"cache .*\.npz: its arrays do not match their sha256; decoding again$"):
        _, ytr, _, _ = read(bench(arc.name), data, False, True, cache)
    np.testing.assert_array_equal(ytr, expected("train")[1])
    IF._MEMO.clear()
    np.testing.assert_array_equal(IF._load_cached(cached, 3)[1], expected("train")[1])  # replaced


def test_the_identity_records_the_arrays_as_decoded(tmp_path):
    """A cache file forged whole (labels shifted, its sha256 made anew) is loaded, but its run has
    another identity than the archive's decoded arrays give: no result of one stands for the other."""
    data = tmp_path / "data"
    write_archive(data / "tiny", "tar.gz", members())
    ov = [*TINY, f"data.root={data}", f"data.cache_dir={tmp_path / 'cache'}"]
    genuine = identity.data_identity(cfg := make_cfg(*ov), sources.bind(cfg.benchmark))
    arrays = (*expected("train"), *expected("test"), sorted(CLASSES))
    assert genuine["decoded"] == IF.content_sha256(arrays)
    (cached,) = (tmp_path / "cache" / "image_folder").glob("*.npz")
    forged = (arrays[0], (arrays[1] + 1) % 3, *arrays[2:])
    rewrite(cached, ytr=forged[1], sha256=np.asarray(IF.content_sha256(forged)))
    IF._MEMO.clear()
    other = identity.data_identity(cfg, sources.bind(cfg.benchmark))
    assert other["files"] == genuine["files"] and other["decoded"] == IF.content_sha256(forged) != genuine["decoded"]
    new = {"key": "b", "config": {}, "code": {}, "data": other, "env": {}}
    assert identity.differences({**new, "key": "a", "data": genuine}, new) == [("data", "decoded differs")]


def test_a_cache_write_killed_with_sigkill_leaves_no_temporary_file(tmp_path):
    """kill -9 while the cache is written left `.<name>.<pid>.tmp` (up to 185 MB) for good. A writer's
    temporary file names its host and pid; the next look-up removes those whose writer is gone, and
    keeps a live writer's and another host's."""
    data, cache = tmp_path / "data", tmp_path / "cache"
    arc = write_archive(data / "tiny", "tar", members())
    code = (
        "import sys, time\nimport numpy as np\nfrom clsuite.core.data import imagefolder as IF\n"
        "def stuck(f, **arrays):\n    f.write(b'x' * 4096); f.flush(); print('writing', flush=True); time.sleep(120)\n"
        "np.savez = stuck\n"
        f"IF.read_image_folder({str(data)!r}, {bench(arc.name)!r}, download=False, verify=True, cache_dir={str(cache)!r})\n"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src")}
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert p.stdout.readline() == "writing\n"
    finally:
        p.kill()
        p.wait()
    folder = cache / "image_folder"
    (left,) = folder.glob(".*.tmp")
    assert left.stat().st_size == 4096
    alive = folder / f".other.npz.{IF.HOST}.{os.getpid()}.tmp"
    elsewhere = folder / f".other.npz.{IF.HOST}-not.{p.pid}.tmp"
    for f in (alive, elsewhere):
        f.write_bytes(b"x")
    read(bench(arc.name), data, False, True, cache)
    assert sorted(f.name for f in folder.iterdir()) == sorted(
        [alive.name, elsewhere.name, IF.cache_file(str(cache), md5(arc), 3).name]
    )


def test_an_unwritable_cache_is_a_warning_not_a_lost_run(tmp_path):
    data = tmp_path / "data"
    arc = write_archive(data / "tiny", "tar", members())
    blocker = tmp_path / "file"
    blocker.write_text("a file where the cache folder would be")
    with pytest.warns(UserWarning, match="cache not written"):
        x = read(bench(arc.name), data, False, True, blocker)[0]
    np.testing.assert_array_equal(x, expected("train")[0])


def test_the_cache_location(tmp_path, monkeypatch):
    """``data.cache_dir`` is the one setting: no environment variable of the suite moves the cache."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("CLSUITE_CACHE_DIR", str(tmp_path / "env"))
    assert IF.cache_root(None) == tmp_path / "xdg" / "clsuite"
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


# ----------------------------------------------------------------------------- links and other members


def tar_member(name: str, kind: bytes = tarfile.REGTYPE, link: str = "", data: bytes = b"") -> tuple:
    info = tarfile.TarInfo(name)
    info.type, info.linkname, info.size = kind, link, len(data)
    return info, data


def moved(kind: str, tmp_path: Path, *added) -> Path:
    """The archive of :func:`members` with ``test/cat/b.png`` moved to ``pool/b.png`` (outside the
    layout), and ``added`` tar members (:func:`tar_member`) appended to a .tar."""
    files = members()
    files["pool/b.png"] = files.pop("test/cat/b.png")
    arc = write_archive(tmp_path / "d" / "arc", kind, files)
    if added:
        with tarfile.open(arc, "a") as tar:
            for info, data in added:
                tar.addfile(info, io.BytesIO(data))
    return arc


@pytest.mark.parametrize("how", ["tar symlink", "tar hard link", "dir symlink", "dir symlink, linked data dir"])
def test_a_link_to_a_file_inside_the_archive_is_read_as_that_file(tmp_path, how):
    """The member rule (docs/DEVELOPING.md): both kinds read a link to a file inside the archive as its
    target (a tar dropped such members: 99 test images instead of 100, exit 0). A data folder that is
    itself a link is read through."""
    if how.startswith("tar"):
        link = ("pool/b.png", tarfile.LNKTYPE) if "hard" in how else ("../../pool/b.png", tarfile.SYMTYPE)
        arc = moved("tar", tmp_path, tar_member("test/cat/b.png", link[1], link[0]))
    else:
        arc = moved("dir", tmp_path)
        os.symlink("../../pool/b.png", arc / "test" / "cat" / "b.png")
    root = tmp_path / "d"
    if "linked data dir" in how:
        os.symlink(root, tmp_path / "linked")
        root = tmp_path / "linked"
    xtr, ytr, xte, yte = read(bench(arc.name), root, False, True, tmp_path / "c")
    for (x, y), split in (((xtr, ytr), "train"), ((xte, yte), "test")):
        np.testing.assert_array_equal(x, expected(split)[0])
        np.testing.assert_array_equal(y, expected(split)[1])


MEMBER = ": member test/cat/b.png is "
TAR_REFUSED = {  # tar members appended to `moved`'s .tar: the end of the error line
    "link out": ([("../../../out.png", tarfile.SYMTYPE)], MEMBER + "a link to ../../../out.png, outside the archive"),
    "absolute link": ([("/etc/hostname", tarfile.SYMTYPE)], MEMBER + "a link to /etc/hostname, outside the archive"),
    "dangling link": ([("gone.png", tarfile.SYMTYPE)], MEMBER + "a link to gone.png, which the archive does not hold"),
    "dangling hard link": ([("gone.png", tarfile.LNKTYPE)], MEMBER + "a link to gone.png, which the archive does not"),
    "link to a folder": ([("../../train", tarfile.SYMTYPE)], MEMBER + "a link to train, a folder, not an image file"),
    "loop of links": ([("b.png", tarfile.SYMTYPE)], MEMBER + "a loop of links"),
    "FIFO": ([("", tarfile.FIFOTYPE)], MEMBER + "a FIFO, not an image file"),
    "device": ([("", tarfile.CHRTYPE)], MEMBER + "a character device, not an image file"),
}
NAMES_REFUSED = {  # a regular member's name: the end of the error line
    "x/../../test/cat/b.png": ": member x/../../test/cat/b.png is named outside the archive (absolute or ..)",
    "/test/cat/b.png": ": member /test/cat/b.png is named outside the archive (absolute or ..)",
    "train/cat/1.png": " holds member train/cat/1.png twice; keep one",
}


@pytest.mark.parametrize("case", [*TAR_REFUSED, *NAMES_REFUSED])
def test_a_tar_member_that_is_no_image_file_of_the_archive_is_refused_by_name(tmp_path, case):
    """Each was skipped without a word (a link, a FIFO), or read (a name leaving the archive, a name twice)."""
    if case in TAR_REFUSED:
        ((link, kind),) = TAR_REFUSED[case][0]
        added, needle = [tar_member("test/cat/b.png", kind, link)], TAR_REFUSED[case][1]
        if case == "link to a folder":
            added.insert(0, tar_member("train", tarfile.DIRTYPE))
    else:
        added, needle = [tar_member(case, data=png(pixels("test", "cat", "b.png")))], NAMES_REFUSED[case]
    arc = moved("tar", tmp_path, *added)
    with pytest.raises(DataError, match=f"^image-folder archive {re.escape(str(arc))}{re.escape(needle)}"):
        read(bench(arc.name), tmp_path / "d", False, True, tmp_path / "c")


@pytest.mark.parametrize("case", ["link out", "dangling link", "link to a folder", "FIFO"])
def test_a_folder_member_that_is_no_image_file_of_the_archive_is_refused_by_name(tmp_path, case):
    """The same rule for a folder archive, which followed a link anywhere and skipped the others."""
    arc = moved("dir", tmp_path)
    (tmp_path / "out.png").write_bytes(png(pixels("test", "cat", "b.png")))
    member, needle = arc / "test" / "cat" / "b.png", MEMBER
    if case == "link out":
        os.symlink("../../../../out.png", member)
        needle += "a link to ../../../../out.png, outside the archive; copy the file in"
    elif case == "dangling link":
        os.symlink("gone.png", member)
        needle += "a link to gone.png, which does not exist"
    elif case == "link to a folder":
        os.symlink("../../train/cat", member)
        needle += "a link to ../../train/cat, a folder, not an image file"
    else:
        os.mkfifo(member)
        needle += "a FIFO, not an image file or a folder"
    with pytest.raises(DataError, match=f"^image-folder archive {re.escape(str(arc))}{re.escape(needle)}$"):
        read(bench(arc.name), tmp_path / "d", False, True, tmp_path / "c")


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
    decoded = IF.content_sha256((*expected("train"), *expected("test"), sorted(CLASSES)))
    assert res["identity"]["data"] == {"files": {"tiny.tar.gz": md5(arc)}, "decoder": IF.decoder(), "decoded": decoded}
    assert IF.decoder().startswith("Pillow ")
    assert len(list((tmp_path / "cache" / "image_folder").glob(f"{md5(arc)}-*.npz"))) == 1
    # where the cache lives changes no result: not part of the identity
    a = identity.normalize(make_cfg(*ov))
    b = identity.normalize(make_cfg(*ov[:-1], "data.cache_dir=/elsewhere"))
    assert a == b and "cache_dir" not in a["data"]


def test_the_config_check_and_the_run_hash_and_decode_the_archive_once(tmp_path, monkeypatch):
    """The config check reads the archive (md5, members, images) before any folder is made; the run
    and its identity reuse that read: one md5 and one decode per process."""
    from clsuite.core.data import files

    data = tmp_path / "data"
    write_archive(data / "tiny", "tar.gz", members())
    hashed, decoded = [], []
    real_md5, real_decode = files._md5, IF.decode
    monkeypatch.setattr(files, "_md5", lambda *a: hashed.append(a) or real_md5(*a))
    monkeypatch.setattr(IF, "decode", lambda *a: decoded.append(a) or real_decode(*a))
    api.run([*TINY, f"data.root={data}", f"data.cache_dir={tmp_path / 'cache'}"], tmp_path / "run")
    assert (len(hashed), len(decoded)) == (1, 1)


def test_a_folder_is_an_archive_too_and_its_identity_is_the_tree_md5(tmp_path):
    data = tmp_path / "data"
    d = write_archive(data / "tree", "dir", members())
    ov = [*TINY, "benchmark.image_folder.path=tree", f"data.root={data}", f"data.cache_dir={tmp_path / 'c'}"]
    api.compose(ov)  # the config check accepts a folder for this source (a folder of MNIST files is refused)
    assert identity.data_identity(cfg := make_cfg(*ov), sources.bind(cfg.benchmark))["files"] == {
        "tree": IF.checksum(d)
    }


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


def test_an_image_is_read_and_decoded_within_bounds(tmp_path, monkeypatch):
    """A member larger than MAX_IMAGE_BYTES is refused before it is read (a tar.gz member may claim
    any size); Pillow's decompression-bomb error was a traceback."""
    from PIL import Image

    files = members()
    bound = max(len(v) for v in files.values())
    files["test/cat/b.png"] += bytes(bound)  # (after the PNG's end)
    arc = write_archive(tmp_path / "d" / "t", "tar", files)
    monkeypatch.setattr(IF, "MAX_IMAGE_BYTES", bound)
    size = len(files["test/cat/b.png"])
    with pytest.raises(
        DataError, match=rf"t\.tar: member test/cat/b\.png is {size} bytes; an image is read up to {bound}$"
    ):
        read(bench(arc.name), tmp_path / "d", False, True, tmp_path / "c")
    monkeypatch.setattr(IF, "MAX_IMAGE_BYTES", 1 << 20)
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 5)  # a 4 x 5 image is then a bomb (more than twice as many pixels)
    with pytest.raises(DataError, match=r"^undecodable image .*t\.tar: train/ant/1\.png: Image size \(20 pixels\)"):
        read(bench(arc.name), tmp_path / "d", False, True, tmp_path / "c")


@pytest.mark.parametrize("cut", ["at a member", "in a header"])
def test_a_tar_cut_short_is_refused(tmp_path, cut):
    """A .tar cut where a member starts read as a shorter archive (5 test images instead of 6)."""
    arc = write_archive(tmp_path / "d" / "t", "tar", members())
    with tarfile.open(arc) as tar:
        start = tar.getmember("test/cat/a.png").offset
    (tmp_path / "d" / "cut.tar").write_bytes(arc.read_bytes()[: start + (0 if cut == "at a member" else 100)])
    with pytest.raises(DataError, match=r"cut\.tar is truncated: it ends without tar's end-of-archive block$"):
        read(bench("cut.tar"), tmp_path / "d", False, True, tmp_path / "c")


ARCHIVE_REFUSED = {  # what stands at data.root/tiny.tar.gz: the error line
    "FIFO": "data file {} is a FIFO, not a regular file",
    "device": "data file {} is a character device, not a regular file",
    "empty": "data file {} is empty (0 bytes)",
    "md5": "corrupted data file {}: md5 ",
    "link out": "image-folder archive {}: member test/cat/b.png is a link to ../../../out.png, outside the archive",
}


@pytest.mark.parametrize("case", ARCHIVE_REFUSED)
def test_the_config_check_refuses_an_archive_before_any_run(tmp_path, case):
    """The config check (before any folder is made) opens the archive as a regular file, checks its
    md5 and reads it: a FIFO hung the run, an md5 mismatch and a bad member were refused in the run."""
    data, target = tmp_path / "data", tmp_path / "data" / "tiny.tar.gz"
    data.mkdir()
    ov = [*TINY, f"data.root={data}", f"data.cache_dir={tmp_path / 'c'}"]
    if case == "FIFO":
        os.mkfifo(target)
    elif case == "device":
        os.symlink("/dev/zero", target)
    elif case == "empty":
        target.write_bytes(b"")
    elif case == "md5":
        write_archive(data / "tiny", "tar.gz", members())
        ov.append(f"benchmark.image_folder.md5={'0' * 32}")
    else:
        moved("tar", tmp_path, tar_member("test/cat/b.png", tarfile.SYMTYPE, "../../../out.png")).rename(target)
    with pytest.raises(ConfigError, match="^" + re.escape(ARCHIVE_REFUSED[case].format(target))):
        api.compose(ov)


@pytest.mark.parametrize("download", ["true", "false"])
@pytest.mark.parametrize("root", ["empty", "nowhere"])
def test_a_missing_archive_is_refused_by_the_config_check_download_or_not(tmp_path, download, root):
    """This source cannot download: data.download=true with no archive passed the config check and was
    refused in the run, after Hydra had made its folder; without it, the line advised data.download=true."""
    (tmp_path / "empty").mkdir()
    missing = tmp_path / root / "CIFAR10-jpeg" / "cifar10-jpeg.tar.gz"
    with pytest.raises(ConfigError) as e:
        api.compose(["benchmark=split_cifar10_jpeg", f"data.download={download}", f"data.root={tmp_path / root}"])
    assert str(e.value) == (
        f"missing data file {missing}; benchmark.source image_folder cannot download it, data.download=true or not: "
        "put it there, or set DATA_DIR or data.root to the folder that holds CIFAR10-jpeg/cifar10-jpeg.tar.gz"
    )


def test_a_fifo_in_place_of_the_archive_is_one_line_and_no_folder(tmp_path):
    """It hung the run for good, after Hydra had made its folder."""
    os.mkfifo(tmp_path / "tiny.tar.gz")
    cmd = [sys.executable, str(Path(__file__).resolve().parents[2] / "src" / "run.py"), *TINY, f"data.root={tmp_path}"]
    p = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert (
        p.returncode == 2 and p.stderr == f"error: data file {tmp_path / 'tiny.tar.gz'} is a FIFO, not a regular file\n"
    )
    assert [q.name for q in tmp_path.iterdir()] == ["tiny.tar.gz"]  # no outputs/


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
