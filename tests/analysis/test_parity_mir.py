"""The MIR side of the parity harness (scripts/parity/mir_side.py) without MIR's checkout: the data feed
gives MIR's ``get_split_cifar10`` torchvision's CIFAR10 arrays from an image folder read by the suite's
reader, and the restored tie rule puts each class pair in its task; the run-time patches match MIR's
pinned text; R is read from MIR's printout; the parity record with MIR rows, its checks and its table.
The end-to-end run of MIR's own er_main.py needs a checkout (``MIR_CHECKOUT``): slow, skipped without one."""

from __future__ import annotations

import copy
import json
import os
import re
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from clsuite.analysis import parity
from clsuite.run import archive as rec
from tests.results_fixtures import fake_R, parity_record

PARITY = Path(__file__).resolve().parents[2] / "scripts" / "parity"
sys.path.insert(0, str(PARITY))

import harness  # noqa: E402
import mir_side  # noqa: E402

MIRROR = Path("/work/.mirror/optimass+Maximally_Interfered_Retrieval/repo")  # a bare mirror, where there is one
CLASSES = [f"c{k}" for k in range(10)]


def _image(label: int, i: int, split: str) -> np.ndarray:
    """A 32x32 RGB image that says its class, index and split (lossless: PNG)."""
    a = np.zeros((32, 32, 3), dtype=np.uint8)
    a[..., 0], a[..., 1], a[..., 2] = 20 * label, 7 * i, 100 if split == "train" else 200
    return a


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """train/<class>/<i>.png (4 each) and test/<class>/<i>.png (2 each), 10 classes."""
    root = tmp_path_factory.mktemp("imgs")
    for split, n in (("train", 4), ("test", 2)):
        for label, c in enumerate(CLASSES):
            (root / "folder" / split / c).mkdir(parents=True)
            for i in range(n):
                Image.fromarray(_image(label, i, split)).save(root / "folder" / split / c / f"{i}.png")
    return root, {"path": "folder", "classes": 10, "train_per_class": 4, "channels": 3}


def test_the_feed_is_torchvisions_cifar10_of_the_suites_reading(folder, monkeypatch):
    root, opts = folder
    monkeypatch.setattr(mir_side.JPEGCifar10, "feed", {"data_root": str(root), "image_folder": opts})
    mir_side.install_torchvision_stub()
    from torchvision import datasets  # the stub: MIR's data.py l.10

    for train, n in ((True, 4), (False, 2)):
        ds = datasets.CIFAR10("Data/", train=train, download=True)
        assert ds.data.dtype == np.uint8 and ds.data.shape == (10 * n, 32, 32, 3)  # torchvision's layout
        assert ds.targets == [k for k in range(10) for _ in range(n)] and all(type(t) is int for t in ds.targets)
        for j, (label, i) in enumerate((k, i) for k in range(10) for i in range(n)):  # class by class, file order
            assert np.array_equal(ds.data[j], _image(label, i, "train" if train else "test"))
    monkeypatch.setattr(mir_side.JPEGCifar10, "feed", {"data_root": str(root), "image_folder": opts,
                                                       "train_per_class": 2, "test_per_class": 1})  # fmt: skip
    small = datasets.CIFAR10("Data/", train=True)
    assert small.targets == [k for k in range(10) for _ in range(2)]
    assert np.array_equal(small.data[3], _image(1, 1, "train"))  # the first two of each class
    for k in [k for k in sys.modules if k == "torchvision" or k.startswith("torchvision.")]:
        monkeypatch.delitem(sys.modules, k)


def _mirs_split(targets: list[int], argmax) -> list[list[int]]:
    """MIR's data.py l.222-253 on the labels alone: its stable sort by label, its class boundaries
    (``argmax``: the tie rule) with its ``x + 1``, its 5 slices; the classes of each task."""
    y = torch.Tensor(sorted(targets))
    idx = [argmax((y + i) % 10) for i in range(10)]
    idx = [0] + [x + 1 for x in sorted(idx)]
    return [sorted({int(v) for v in y[idx[i] : idx[i + 2]].tolist()}) for i in range(0, 10, 2)]


def test_torch_13s_tie_rule_puts_each_class_pair_in_its_task():
    targets = [k for k in range(10) for _ in range(50)][::-1]  # any order: MIR sorts by label
    assert _mirs_split(targets, mir_side._last_argmax) == [[0, 1], [2, 3], [4, 5], [6, 7], [8, 9]]
    assert _mirs_split(targets, lambda t: t.argmax()) != [[0, 1], [2, 3], [4, 5], [6, 7], [8, 9]]  # torch >= 1.7
    t = torch.tensor([1.0, 3.0, 3.0, 2.0])
    assert int(mir_side._last_argmax(t)) == 2 and int(t.argmax()) == 1
    with pytest.raises(RuntimeError, match=r"MIR's train task 0 holds classes \[0, 1, 2\], not \[0, 1\]"):
        mir_side.check_tasks([(None, torch.tensor([0.0, 1.0, 2.0]))], [])


def test_a_patch_must_match_its_text_exactly_as_often_as_it_says():
    p = mir_side.Patch("data.py", "old()", "new()", 2, "why")
    assert mir_side.patched_source("a = old()\nb = old()\n", "data.py", [p]) == "a = new()\nb = new()\n"
    assert mir_side.patched_source("a = old()\n", "er_main.py", [p]) == "a = old()\n"  # another file's
    with pytest.raises(ValueError, match=r"MIR's data.py: 'old\(\)' found 1 times, expected 2"):
        mir_side.patched_source("a = old()\n", "data.py", [p])
    listed = mir_side.patches()
    assert [x["kind"] for x in listed] == ["source"] * len(mir_side.PATCHES) + ["stub"]
    assert all(x["why"] for x in listed)


@pytest.mark.skipif(not MIRROR.is_dir(), reason="no bare mirror of MIR's repository here")
def test_the_patches_match_mirs_pinned_files():
    for file in ("data.py", "er_main.py"):
        text = subprocess.run(["git", "-C", str(MIRROR), "show", f"{mir_side.PINNED}:{file}"], capture_output=True,
                              text=True, check=True).stdout  # fmt: skip
        out = mir_side.patched_source(text, file)
        assert all(p.old not in out for p in mir_side.PATCHES if p.file == file)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SyntaxWarning)  # MIR's `is not ''`
            compile(out, file, "exec")


PRINTOUT = """number of classifier parameters: 1094750

--------------------------------------
Run #1 Task #0 --> Train Classifier
--------------------------------------


valid:
[[0.67 0.  ]
 [0.   0.  ]]

test:
[[0.5 0. ]
 [0.  0. ]]

--------------------------------------
Run #1 Task #1 --> Train Classifier
--------------------------------------


valid:
[[0.33 0.  ]
 [0.   0.67]]

test:
[[0.12 0.  ]
 [0.   0.57]]
--------------------------------------
Run #1 Final Results
--------------------------------------

valid:
final accuracy: [0.33 0.67]
average: 0.5

test:
final accuracy: [0.12 0.57]
average: 0.35
final forgetting: [0.38 0.  ]
average: 0.38

--------------------------------------
Run #2 Task #0 --> Train Classifier
--------------------------------------

test:
[[0.9 0. ]
 [0.  0. ]]

test:
[[0.25 0.  ]
 [0.   0.75]]
--------------------------------------
Run #2 Final Results
--------------------------------------

test:
final accuracy: [0.25 0.75]
"""


def test_R_is_read_from_mirs_printout_transposed_in_percent():
    """er_main.py prints LOG[run][mode]['acc'] ([task_t, task]) after each task; the last test matrix
    before "Run #r Final Results" is the run's."""
    logged = mir_side.parse_output(PRINTOUT)
    assert logged == {1: [[0.12, 0.0], [0.0, 0.57]], 2: [[0.25, 0.0], [0.0, 0.75]]}
    assert mir_side.to_R(logged[1]) == [[12.0, 0.0], [0.0, 57.0]]
    assert mir_side.to_R([[0.5, 0.08], [0.0, 0.48]]) == [[50.0, 0.0], [8.0, 48.0]]  # R[i][j]: task j after task i
    assert mir_side.parse_output("test:\n[[0.5]]\n") == {}  # no run finished
    with pytest.raises(ValueError, match="not square"):
        mir_side.to_R([[0.1, 0.2]])


def test_the_child_reads_the_data_root_the_parent_was_given(tmp_path, monkeypatch):
    """MIR's child runs in a scratch folder: a data root relative to the parent's folder reaches it as that folder."""
    seen = {}

    def fake_run(cmd, cwd, **kw):
        seen["cwd"], seen["spec"] = cwd, json.loads(Path(cmd[-1]).read_text())
        return subprocess.CompletedProcess(cmd, 1, "", "stopped by the test")

    (tmp_path / "data").mkdir()
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(mir_side.subprocess, "run", fake_run)
    with pytest.raises(RuntimeError, match="stopped by the test"):
        mir_side.run(tmp_path, "er", 0, data_root="data", image_folder={})
    assert Path(seen["cwd"]) != tmp_path and seen["spec"]["feed"]["data_root"] == str(tmp_path.resolve() / "data")


def _mir_record() -> dict:
    record = parity_record({("hal", "split_mnist"): {0: (80.0, 79.0)}})
    side = lambda a: {"R": fake_R(5, a).tolist(), "acc": float(fake_R(5, a)[-1].mean())}  # noqa: E731
    for method, accs in (("er", {0: (30.0, 28.0), 1: (32.0, 27.0), 2: (31.0, 29.0)}), ("mir", {0: (33.0, 30.0)})):
        record["rows"].append({"method": method, "benchmark": "split_cifar10_jpeg", "reading": "mir_code",
                               "reference": "mir", "suite_overrides": ["memory=100", "trainer.numerics=portable"],
                               "settings": {"train_per_class": None},
                               "seeds": [{"seed": s, "suite": side(a), "mir": side(r)} for s, (a, r) in accs.items()]})  # fmt: skip
    record["provenance"].update(mir_commit="35eda78", mir_patches=mir_side.patches())
    return record


def test_a_record_with_mir_rows_is_checked_and_shows_both_tables():
    record = _mir_record()
    assert rec.parity_problem(record) is None
    for edit, why in [
        (lambda r: r["provenance"].pop("mir_commit"), "its provenance lacks mir_commit"),
        (lambda r: r["rows"][1]["seeds"][0].pop("mir"), r"row 2 \(er split_cifar10_jpeg mir_code\), seed 0, mir: R is"),
        (lambda r: r["rows"][1].update(reference="avalanche"), "a row's reference 'avalanche' is none of mammoth, mir"),
        (lambda r: r["rows"].append(copy.deepcopy(r["rows"][1])), "row 4: er split_cifar10_jpeg mir_code is in an"),
    ]:
        r = copy.deepcopy(record)
        edit(r)
        assert re.search(why, rec.parity_problem(r) or "")
    only_mir = copy.deepcopy(record)
    only_mir["rows"] = only_mir["rows"][1:]
    only_mir["provenance"].pop("mammoth_commit")
    assert rec.parity_problem(only_mir) is None  # no Mammoth row: no Mammoth commit needed
    assert [t.title.split(" ")[0] for t in parity.tables(record)] == ["Acc", "Acc"] and len(
        parity.tables(only_mir)
    ) == 1
    md = "\n".join(parity.markdown(record, "docs/records/parity.json"))
    assert "| HAL | split-MNIST |" in md and "The suite's ER and MIR beside MIR's own code" in md
    er = next(line for line in md.splitlines() if line.startswith("| ER |"))
    assert "| 0-2 | 31.0 ± 1.0 | 28.0 ± 1.0 | +3.0 [" in er  # Acc: mean ± sd; the difference of the means
    assert "35eda78" in md and "Not paired" in md and "SMOKE" not in md
    dip = copy.deepcopy(record)
    dip["rows"][1]["seeds"][0]["suite"]["R"][1][1] = 0.0  # task 2 just after its training, one seed of three
    er = next(line for line in parity.mir_table(dip).markdown().splitlines() if line.startswith("| ER |"))
    assert "| 90 / 60 / 90 / 90 / 31 | 90 / 90 / 90 / 90 / 28 | 31 / 31 / 31 / 31 / 31 | 28 / 28" in er  # diagonals
    smoke = copy.deepcopy(only_mir)
    smoke["rows"][0]["settings"]["train_per_class"] = 100
    assert "SMOKE: 100 training images per class" in parity.mir_table(smoke).note
    assert "+3.0 (n=1, 1: no interval)" in parity.mir_table(smoke).markdown()  # MIR's row: one seed
    assert parity.markdown(parity_record({("hal", "split_mnist"): {0: (80.0, 79.0)}}), "x")[0].startswith(
        "The suite's GSS, iCaRL and HAL")  # a record without MIR rows: as before  # fmt: skip


def test_a_merged_record_keeps_each_reference_codes_part_with_its_own_provenance():
    """``records pack --parity`` onto a held record: a reference code's rows come from the newest harness record
    that has any, whole; each part keeps the code, CPU and kernels it ran with, and each table shows its own."""
    both = _mir_record()
    mammoth, mir = copy.deepcopy(both), copy.deepcopy(both)
    mammoth["rows"], mir["rows"] = both["rows"][:1], both["rows"][1:]
    mammoth["provenance"].update(cpu="Intel Xeon", suite_code="aaaaaaaaaaaaaaaa")
    mir["provenance"].update(cpu="AMD EPYC", suite_code="bbbbbbbbbbbbbbbb", numerics={"mode": "native"})
    merged = rec.merge_parity(mammoth, mir)
    assert merged == {"parts": [mammoth, mir]} and rec.merge_parity(mir, mammoth) == merged
    assert rec.parity_problem(merged) is None
    newer = copy.deepcopy(mir)
    newer["rows"][0]["seeds"][0]["suite"] = copy.deepcopy(newer["rows"][0]["seeds"][1]["suite"])
    assert rec.merge_parity(merged, newer) == {"parts": [mammoth, newer]}  # MIR's part replaced whole
    assert rec.merge_parity(merged, both) == both  # a record of both reference codes replaces both parts
    assert rec.merge_parity(mammoth, mammoth) == mammoth
    acc, mir_t = parity.tables(merged)
    assert "aaaaaaaaaaaaaaaa" in acc.note and "Intel Xeon" in acc.note and "AMD EPYC" not in acc.note
    assert "bbbbbbbbbbbbbbbb" in mir_t.note and "AMD EPYC" in mir_t.note and "Intel Xeon" not in mir_t.note
    md = "\n".join(parity.markdown(merged, "docs/records/parity.json"))
    assert acc.markdown() in md and mir_t.markdown() in md
    for bad, why in [
        ({"parts": [mammoth]}, "parts: two or more harness records"),
        ({"parts": [mammoth, mir], "rows": []}, "nothing beside them"),
        ({"parts": [mir, copy.deepcopy(mir)]}, r"reference codes \['mir', 'mir'\] repeat"),
        ({"parts": [mammoth, {**mir, "rows": [{**mir["rows"][0], "seeds": []}]}]}, "part 2: row 1: not a row"),
    ]:
        assert re.search(why, rec.parity_problem(bad) or ""), bad


def test_the_harness_refuses_a_mir_folder_that_is_not_mirs_and_methods_without_their_reference(tmp_path, capsys):
    assert harness.main(["--out", str(tmp_path / "p.json")]) == 2
    assert capsys.readouterr().err == "error: name a reference: --mammoth <checkout> and/or --mir <checkout>\n"
    assert harness.main(["--mir", str(tmp_path), "--out", str(tmp_path / "p.json")]) == 2
    assert capsys.readouterr().err.startswith(f"error: --mir {tmp_path.resolve()} is not a MIR checkout")
    assert harness.main(["--mir", str(tmp_path), "--methods", "gss", "--out", str(tmp_path / "p.json")]) == 2
    assert capsys.readouterr().err == "error: --methods gss needs --mammoth\n"
    assert not (tmp_path / "p.json").exists()


CHECKOUT = os.environ.get("MIR_CHECKOUT")


@pytest.mark.slow
@pytest.mark.skipif(not (CHECKOUT and mir_side.is_checkout(Path(CHECKOUT))), reason="MIR_CHECKOUT: no MIR checkout")
@pytest.mark.parametrize("method", ["er", "mir"])
def test_mirs_own_er_main_runs_on_the_feed_and_its_R_is_read(folder, method, tmp_path):
    root, opts = folder
    out = mir_side.run(CHECKOUT, method, 1, data_root=root, image_folder=opts, numerics="native", keep=tmp_path)
    R = np.asarray(out["R"])
    assert R.shape == (5, 5) and np.all(np.triu(R, 1) == 0) and np.all((R >= 0) & (R <= 100))
    assert out["acc"] == pytest.approx(R[-1].mean())
    log = (tmp_path / f"mir_{method}_seed1.log").read_text()
    assert "Run #1 Final Results" in log and "buffer has 1000 slots" in log
    assert json.dumps(out["argv"]) == json.dumps(mir_side.SCRIPT_LINES[method])


def _records_of(tmp_path, cfgs, R_of, **over) -> Path:
    """A records folder holding the record ``row``: one sealed run per config (``over``: its config's keys changed)."""
    from omegaconf import OmegaConf

    from tests.results_fixtures import write_run

    mr = tmp_path / "multirun" / "row"
    for cfg in cfgs:
        c = {**OmegaConf.to_container(cfg, resolve=True), **over}
        write_run(mr, cfg.benchmark.name, cfg.method.name, cfg.seed, R=R_of(cfg), reading="mir_code", extra_cfg=c,
                  cpu="EPYC")  # fmt: skip
    data = rec.archive_bytes({f"{p.parent.name}/results.json": p.read_bytes() for p in mr.glob("*/results.json")})
    records = tmp_path / "records"
    records.mkdir()
    (records / "row.tar.gz").write_bytes(data)
    entry = {"file": "row.tar.gz", "sha256": rec.sha256(data), "bytes": len(data)}
    (records / rec.MANIFEST_FILE).write_text(rec.manifest_text({"archives": {"row": entry}}))
    return records


def _cfg(method, seed, reading="mir_code", extra=()):
    """A MIR row's config on synthetic data (an empty ``image_folder`` for MIR's side, which the fakes ignore)."""
    import suite_side
    from omegaconf import open_dict

    cfg = suite_side.compose(method, "synthetic", seed, reading, ["memory=100", *extra])
    with open_dict(cfg):
        cfg.benchmark.image_folder = {}
    return cfg


def test_the_suites_side_is_read_from_a_sealed_run_of_the_same_settings(tmp_path):
    """``--suite-from``: the run of the same cell and seed whose config is the harness's (its kernels aside),
    with where it came from; another seed, or a run of other settings, is refused with the key that differs."""
    import suite_side

    from clsuite.core.errors import ConfigError

    R_of = lambda c: fake_R(5, 30.0 + c.seed)  # noqa: E731
    records = _records_of(tmp_path, [_cfg("er", 0), _cfg("er", 1)], R_of)
    runs = suite_side.recorded_runs(records, "row")
    side = suite_side.recorded(runs, _cfg("er", 1, extra=["trainer.numerics=portable"]), "row")
    assert side["R"] == fake_R(5, 31.0).tolist() and side["acc"] == pytest.approx(fake_R(5, 31.0)[-1].mean())
    assert rec._side_problem(side) is None
    job = next(p.name for p in (tmp_path / "multirun" / "row").glob("*seed=1*"))
    assert side["from"] == {"record": "row", "job": job, "code": runs["code"].iloc[0], "commit": runs["commit"].iloc[0],
                            "cpu": "EPYC", "numerics": "unrecorded"}  # fmt: skip
    with pytest.raises(ConfigError, match=r"no sealed run of er synthetic mir_code seed 2 in these settings$"):
        suite_side.recorded(runs, _cfg("er", 2), "row")
    with pytest.raises(ConfigError, match=r"seed 0 in these settings: .*\(lr=0\.1, not 0\.05\)"):
        suite_side.recorded(runs, _cfg("er", 0, extra=["lr=0.05"]), "row")
    with pytest.raises(ConfigError, match=r"no such record in .* \(it holds row\)"):
        suite_side.recorded_runs(records, "nope")


def test_the_harness_reads_the_suites_side_and_runs_mirs_in_parallel(tmp_path, monkeypatch, capsys):
    """``--suite-from row --jobs 2``: every seed's suite side found in the record before any run, MIR's side two
    at a time; the record keeps the seeds in order whatever order they finish in, each suite side naming its
    run, and the table says where the suite's side came from. ``--jobs`` above 1 needs ``--suite-from``."""
    import threading
    import time

    monkeypatch.setattr(harness, "mir_cfg", lambda m, s, reading, extra, n: _cfg(m, s, reading, extra))
    monkeypatch.setattr(mir_side, "is_checkout", lambda root: True)
    monkeypatch.setattr(mir_side, "checkout_commit", lambda root: parity.MIR_PINNED)
    monkeypatch.setattr(harness, "provenance", lambda commit: dict(_mir_record()["provenance"]))
    monkeypatch.setattr("clsuite.config.numerics.apply", lambda mode: None)
    ran, running, lock = [], [0, 0], threading.Lock()  # running: now, at most

    def mir_run(root, method, seed, **kw):
        with lock:
            running[0] += 1
            running[1] = max(running)
        time.sleep(0.4 if seed == 0 else 0.1)  # seed 0 finishes last
        with lock:
            running[0] -= 1
            ran.append((method, seed))
        R = fake_R(5, 20.0 + seed)
        return {"R": R.tolist(), "acc": float(R[-1].mean()), "argv": ["er_main.py"]}

    monkeypatch.setattr(mir_side, "run", mir_run)
    cfgs = [_cfg(m, s) for m in ("er", "mir") for s in (0, 1, 2)]
    records = _records_of(tmp_path, cfgs, lambda c: fake_R(5, 30.0 + c.seed))
    out = tmp_path / "parity.json"
    args = ["--mir", str(tmp_path), "--suite-from", "row", "--records", str(records), "--out", str(out)]
    assert harness.main([*args, "--mir-seeds", "0", "3"]) == 2  # seed 3 is not in the record: nothing runs
    assert "no sealed run of er synthetic mir_code seed 3" in capsys.readouterr().err and not ran
    assert harness.main([*args, "--jobs", "2"]) == 0
    assert running[1] == 2  # two of MIR's runs at once, never more
    saved = json.loads(out.read_text())
    assert (
        saved["complete"]
        and rec.parity_problem(saved) is None
        and sorted(ran) == sorted((m, s) for m in ("er", "mir") for s in (0, 1, 2))
    )
    assert [(r["method"], [s["seed"] for s in r["seeds"]], r["suite_from"]) for r in saved["rows"]] == [
        ("er", [0, 1, 2], "row"), ("mir", [0, 1, 2], "row")]  # fmt: skip
    seed1 = saved["rows"][1]["seeds"][1]["suite"]
    assert (
        seed1["R"] == fake_R(5, 31.0).tolist()
        and seed1["from"]["record"] == "row"
        and "method=mir" in seed1["from"]["job"]
    )
    assert "read from the sealed runs of the record row (code " in parity.mir_table(saved).note
    assert harness.main(["--mir", str(tmp_path), "--jobs", "2", "--out", str(tmp_path / "x.json")]) == 2
    assert "--jobs 2: a whole number from 1, above 1 only with --suite-from" in capsys.readouterr().err
