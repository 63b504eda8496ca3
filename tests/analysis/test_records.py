"""Records and the checks a reader runs on them (docs/INTEGRITY.md, section 8; README, "Checking the report").

Packing (``clsuite records pack``): the same runs give the same bytes; a run the report would leave out,
one off the real data, one whose code is not its commit's, or two runs of one seed are refused and
nothing is written; the parity record is carried byte for byte, or refused. Reading back
(``clsuite.run.archive.extract``): a missing, extra or changed archive or parity record and a hostile
member are refused. Rebuilding (``clsuite report --records --docs``, ``clsuite records
check``): the report built from records is the same bytes wherever and in whichever process it is
built, and a hand edit, a stale report, a missing or forged record or a changed figure fails the check;
on made-up runs (tests/results_fixtures.py), then on the committed records once they hold a whole
report. Replaying (``clsuite replay``): a real split-MNIST run under portable kernels rerun here gives
its record's R bit for bit, and a forged R is named cell by cell; then a fixed sample of the committed
records (both need the MNIST files under ``DATA_DIR``).
"""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from clsuite import paper
from clsuite.analysis import figures as fg
from clsuite.analysis.choices import CHOICES
from clsuite.analysis.docs_gate import code_at
from clsuite.analysis.records import check, compare, main, pack, rebuild
from clsuite.analysis.report import ORIGIN, SECTIONS, number
from clsuite.core.metrics import all_metrics
from clsuite.run import archive as rec
from clsuite.run.identity import normalize
from clsuite.run.io import sha256
from clsuite.run.replay import cpu_kind, first_difference, machine_line
from clsuite.run.replay import main as replay_main
from clsuite.run.results import as_today as rec_as_today
from tests.results_fixtures import _R, edit_run, fake_R, parity_record, write_run

ROOT = Path(__file__).resolve().parents[2]
RECORDS = ROOT / "docs" / "records"
TABLE2_JOB = "benchmark=split_mnist,lambda=0.0,memory=100,method=er,reading=mir_code,seed=0,tau=0.5"
PARITY_ACC = {("gss", "split_mnist"): {0: (83.0, 80.0), 1: (81.0, 79.5)}, ("hal", "split_fmnist"): {0: (70.0, 71.0)}}


def _head() -> tuple[str, str] | None:
    """(commit, its code hash) of this checkout's HEAD; None outside a git checkout."""
    p = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True, check=False)
    code = code_at("HEAD", ROOT) if p.returncode == 0 else None
    return (p.stdout.strip(), code) if code else None


HEAD = _head()
needs_git = pytest.mark.skipif(HEAD is None, reason="packing checks each run's commit in a git checkout")


def _suite(mr: Path, seeds=(0, 1)) -> list[str]:
    """Made-up sealed runs filling every section docs/ needs (few methods, seeds), made by HEAD's code."""
    kw = {"commit": HEAD[0], "code_hash": HEAD[1], "reading": "mir_code"}
    b, f = "split_mnist", "split_fmnist"
    for s in seeds:
        for m in ("er", "adaer"):
            write_run(mr / "table2", b, m, s, R=_R(b, m, s), **kw)
            write_run(mr / "first_task", b, m, s, R=_R(b, m, s), **kw)
            for M in (50, 200):
                write_run(mr / "memory", b, m, s, memory=M, R=_R(b, m, s, shift=(M - 100) / 1000), **kw)
            for lam in (0.0, 0.5):
                write_run(mr / "imbalance", f, m, s, lam=lam, R=_R(f, m, s, shift=-lam / 4), **kw)
        for m in ("er", "ccmr"):
            write_run(mr / "ablation", b, m, s, memory=50, R=_R(b, m, s, shift=-0.05), **kw)
        for tau in (0.1, 0.5):
            write_run(mr / "tau", b, "adaer", s, tau=tau, R=_R(b, "adaer", s, shift=-abs(tau - 0.5) / 4), **kw)
    return ["table2", "first_task", "memory", "imbalance", "ablation", "tau"]


@pytest.fixture
def png_only(monkeypatch):
    """The figures as PNG only (the PDFs are results/'s, never docs/'s, and the slow part)."""
    monkeypatch.setattr(fg, "FORMATS", ("png",))


# ----------------------------------------------------------------------------- packing


@needs_git
def test_packing_the_same_runs_twice_gives_the_same_bytes(tmp_path):
    mr = tmp_path / "multirun"
    names = _suite(mr, seeds=(0,))
    (mr / "tau" / "grid.json").write_text('{"jobs": []}')
    (mr / "tau" / "stray").mkdir()
    (mr / "tau" / "stray" / "failed.json").write_text('{"error": "diverged"}')  # a failed job: kept
    (mr / "tau" / "stray" / "run.log").write_text("log")  # not a record
    assert pack(names, mr, tmp_path / "a") == [] and pack(names, mr, tmp_path / "b") == []
    for n in names:
        a, b = (tmp_path / d / f"{n}.tar.gz" for d in "ab")
        assert a.read_bytes() == b.read_bytes() and a.read_bytes()[4:8] == b"\0\0\0\0"  # gzip mtime 0
    with tarfile.open(tmp_path / "a" / "tau.tar.gz") as tf:
        members = tf.getmembers()
    assert [m.name for m in members] == sorted(m.name for m in members)
    assert {(m.mtime, m.uid, m.gid, m.uname, m.gname, m.mode) for m in members} == {(0, 0, 0, "", "", 0o644)}
    assert {m.name for m in members} == {"grid.json", "stray/failed.json"} | {
        f"{p.parent.name}/results.json" for p in (mr / "tau").glob("*/results.json")
    }
    manifest = json.loads((tmp_path / "a" / "MANIFEST.json").read_text())
    assert (tmp_path / "a" / "MANIFEST.json").read_bytes() == (tmp_path / "b" / "MANIFEST.json").read_bytes()
    t2 = manifest["archives"]["table2"]
    assert t2["sha256"] == sha256((tmp_path / "a" / "table2.tar.gz").read_bytes()) and t2["file"] == "table2.tar.gz"
    assert (t2["runs"], t2["results_files"], t2["codes"]) == (2, 2, {HEAD[1]: HEAD[0][:10]})
    assert t2["numerics"] == {"unrecorded": 2} and t2["cpus"] == {"Linux-test-x86_64": 2}
    got = rec.extract(tmp_path / "a", tmp_path / "out")  # read back: the files as the sweep wrote them
    job = mr / "table2" / TABLE2_JOB
    assert (tmp_path / "out" / "table2" / TABLE2_JOB / "results.json").read_bytes() == (
        job / "results.json"
    ).read_bytes()
    assert got.codes == {HEAD[1]: HEAD[0][:10]} and got.sha256 == sha256(
        (tmp_path / "a" / "MANIFEST.json").read_bytes()
    )


@needs_git
def test_pack_adds_a_folders_runs_to_its_record_and_refuses_a_run_made_again(tmp_path, capsys):
    """An experiment the records hold already keeps its runs when a folder with others is packed (seeds
    run on another machine): the archive and its entry are those of packing all the runs at once; a job
    both hold with other bytes (a run made again) is refused, nothing written; ``--replace``: the folder alone."""
    kw = {"commit": HEAD[0], "code_hash": HEAD[1], "reading": "mir_code"}
    for m in ("er", "adaer"):
        for s in (0, 1):
            job = write_run(tmp_path / "all" / "t", method=m, seed=s, **kw)
            shutil.copytree(job, tmp_path / f"seed{s}" / "t" / job.name)  # each seed on its own machine
    out, at_once = tmp_path / "records", tmp_path / "at_once"
    assert pack(["t"], tmp_path / "all", at_once) == []
    assert pack(["t"], tmp_path / "seed0", out) == []
    assert rec.read_manifest(out)[0]["archives"]["t"]["runs"] == 2
    assert main(["pack", "t", "--multirun-dir", str(tmp_path / "seed1"), "--out", str(out)]) == 0
    assert capsys.readouterr().out.startswith(
        f"t: 4 runs, its record's and the folder's ({tmp_path / 'seed1' / 't'}); 2 in its record before\n"
    )
    assert (out / "t.tar.gz").read_bytes() == (at_once / "t.tar.gz").read_bytes()
    assert rec.read_manifest(out)[0]["archives"] == rec.read_manifest(at_once)[0]["archives"]
    assert pack(["t"], tmp_path / "seed1", out) == []  # the same files again: nothing changes
    assert (out / "t.tar.gz").read_bytes() == (at_once / "t.tar.gz").read_bytes()

    again = next((tmp_path / "seed1" / "t").glob("*method=er*"))
    edit_run(again, lambda r: r.update(wall_time_s=r["wall_time_s"] + 1))  # sealed again, other bytes
    (why,) = pack(["t"], tmp_path / "seed1", out)
    assert why == (f"t/{again.name}/results.json: differs from its copy in {out / 't.tar.gz'} (a run made again): "
                   "move one away, or pack with --replace to write the folder alone")  # fmt: skip
    assert (out / "t.tar.gz").read_bytes() == (at_once / "t.tar.gz").read_bytes()
    assert pack(["t"], tmp_path / "seed1", out, replace=True) == []
    assert rec.read_manifest(out)[0]["archives"]["t"]["runs"] == 2
    with tarfile.open(out / "t.tar.gz") as tf:
        assert {m.name.split("/")[0] for m in tf.getmembers()} == {p.name for p in (tmp_path / "seed1" / "t").iterdir()}


def test_rename_moves_an_archive_and_its_entry_keeping_its_bytes_and_sealed_files(tmp_path, capsys):
    """``clsuite records rename``: the archive's file and manifest entry take the new name, the bytes and
    sha256 stay, it unpacks under the new name with its sealed files as they were; a bad, missing or
    taken name, or a changed archive, renames nothing."""
    old = "cifar10_jpeg_first_row"
    records = tmp_path / "records"
    records.mkdir()
    shutil.copy(RECORDS / f"{old}.tar.gz", records)
    entry = rec.read_manifest(RECORDS)[0]["archives"][old]
    (records / "MANIFEST.json").write_text(rec.manifest_text({"archives": {old: entry}}))
    data = (records / f"{old}.tar.gz").read_bytes()
    assert main(["rename", old, "jpeg_row", "--records", str(records)]) == 0
    assert capsys.readouterr().out.endswith("jpeg_row.tar.gz (was cifar10_jpeg_first_row.tar.gz; the same bytes)\n")
    assert not (records / f"{old}.tar.gz").exists() and (records / "jpeg_row.tar.gz").read_bytes() == data
    assert rec.read_manifest(records)[0]["archives"] == {"jpeg_row": {**entry, "file": "jpeg_row.tar.gz"}}
    rec.extract(records, tmp_path / "out")
    sealed = json.loads(next((tmp_path / "out" / "jpeg_row").glob("*/results.json")).read_text())
    assert sealed["config"]["experiment"] == "i32_cifar10_jpeg"  # as it was run: sealed files are not rewritten
    for args, code, err in [
        (["nothing", "x"], 2, "no archive 'nothing'"),
        (["jpeg_row", "jpeg_row"], 2, "exists already"),
        (["jpeg_row", "../x"], 2, "experiment"),
    ]:
        assert main(["rename", *args, "--records", str(records)]) == code
        assert err in capsys.readouterr().err
    (records / "jpeg_row.tar.gz").write_bytes(data + b"\0")
    assert main(["rename", "jpeg_row", "other", "--records", str(records)]) == 1
    assert "changed after it was packed" in capsys.readouterr().err and (records / "jpeg_row.tar.gz").exists()


def test_a_record_holds_every_job_folder_a_sweep_makes():
    """A job folder is named by ``paths.job_dirname`` (up to ``MAX_DIRNAME`` bytes, hashed beyond):
    every such name is a member a record can hold, and nothing longer is."""
    from clsuite.config.paths import MAX_DIRNAME, job_dirname

    cell = (
        "benchmark=split_mnist,method.update.per_task=null,method=agem,reading=mir_code,seed=6,"
        "trainer.numerics=portable,update@method.update=task_reservoir"
    )  # (a job of sweeps/cells_agem_per_task.yaml: 148 bytes)
    for overrides in (cell, ",".join(f"key{i}=value{i}" for i in range(40)), "a/b,c=%"):
        job = job_dirname(overrides)
        assert rec.member_problem(f"{job}/results.json") is None, job
    assert len(job_dirname(cell).encode()) > 100
    assert "longer than" in rec.member_problem(f"{'x' * (MAX_DIRNAME + 1)}/results.json")


@needs_git
def test_pack_refuses_what_the_report_would_not_count_and_writes_nothing(tmp_path, capsys):
    mr = tmp_path / "multirun"
    kw = {"commit": HEAD[0], "code_hash": HEAD[1], "reading": "mir_code"}
    write_run(mr / "t", method="er", seed=0, **kw)
    edited = write_run(mr / "t", method="er", seed=1, **kw) / "results.json"
    edited.write_text(json.dumps({**json.loads(edited.read_text()), "wall_time_s": 1.0}))  # not sealed again

    def synthetic(r):
        r["config"]["benchmark"]["source"] = "synthetic"
        r["identity"]["config"] = normalize(r["config"])

    edit_run(write_run(mr / "t", method="er", seed=2, **kw), synthetic)
    write_run(mr / "t", method="mir", seed=0, **{**kw, "code_hash": "0123456789abcdef"})
    edit_run(write_run(mr / "t", method="gem", seed=0, **kw), lambda r: r["identity"]["provenance"].update(dirty=True))
    edit_run(
        write_run(mr / "t", method="agem", seed=0, **kw, job="a"),
        lambda r: r["identity"]["env"].update(torch_threads=2),
    )
    write_run(mr / "t", method="agem", seed=0, **kw, job="b")  # the same seed of the cell, another identity
    out = tmp_path / "records"
    assert main(["pack", "t", "--multirun-dir", str(mr), "--out", str(out)]) == 1
    err = capsys.readouterr().err.splitlines()
    job = "benchmark=split_mnist,lambda=0.0,memory=100,method={},reading=mir_code,seed={},tau=0.5"
    assert sorted(err) == sorted([
        f"refused: t/{job.format('er', 1)}: left out by the report (edited after it was written (its digest does not "
        "match its content))",
        "refused: t/a and t/b: two runs of one seed of a cell: a record holds one (move the other away)",
        f"refused: t/{job.format('er', 2)}: not on the real data set (synthetic, or a data file without md5)",
        f"refused: t/{job.format('mir', 0)}: made by code 0123456789abcdef, not the code of its commit {HEAD[0][:10]} "
        f"(that commit's code is {HEAD[1]})",
        f"refused: t/{job.format('gem', 0)}: made by code {HEAD[1]}, not the code of its commit {HEAD[0][:10]}+dirty "
        "(uncommitted changes, or no git commit)",
        "error: 5 runs or records refused (listed above); nothing packed",
    ])  # fmt: skip
    assert not out.exists()
    assert main(["pack", "nope", "--multirun-dir", str(mr), "--out", str(out)]) == 2
    assert capsys.readouterr().err == f"error: experiment 'nope': no folder {mr / 'nope'}/\n" and not out.exists()


def _parity_file(path: Path, record: dict) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=1) + "\n")
    return path


@needs_git
def test_pack_carries_the_parity_record_byte_for_byte_and_refuses_one_that_fails(tmp_path, capsys):
    good = _parity_file(tmp_path / "good.json", parity_record(PARITY_ACC, HEAD[0], HEAD[1]))
    out = tmp_path / "records"
    assert main(["pack", "--parity", str(good), "--out", str(out)]) == 0
    assert (out / "parity.json").read_bytes() == good.read_bytes()
    assert json.loads((out / "MANIFEST.json").read_text())["parity"] == {
        "file": "parity.json", "sha256": sha256(good.read_bytes()), "bytes": len(good.read_bytes()),
        "mammoth_commit": "e75a491", "codes": {HEAD[1]: HEAD[0][:10]}, "cpus": {"Test CPU @ 1.00GHz": 3},
        "numerics": {"portable": 3}, "rows": 2, "pairs": 3,
    }  # fmt: skip
    assert rec.extract(out, tmp_path / "x").parity == json.loads(good.read_text())
    before = (out / "MANIFEST.json").read_bytes()
    incomplete, other_code, dirty, forged = (parity_record(PARITY_ACC, HEAD[0], HEAD[1]) for _ in range(4))
    incomplete["complete"] = False
    other_code["provenance"]["suite_code"] = "0123456789abcdef"
    dirty["provenance"]["suite_dirty"] = True
    forged["rows"][1]["seeds"][0]["suite"]["acc"] = 75.0
    for record, why in [
        (incomplete, "incomplete (the harness was stopped): run it again"),
        (other_code, f"made by code 0123456789abcdef, not the code of its commit {HEAD[0][:10]} (that commit's code "
                     f"is {HEAD[1]})"),
        (dirty, f"made by code {HEAD[1]}, not the code of its commit {HEAD[0][:10]}+dirty (uncommitted changes, or no "
                "git commit)"),
        (forged, "row 2 (hal split_fmnist mir_code), seed 0, suite: acc 75.0 is not the mean of R's last row (70.0)"),
    ]:  # fmt: skip
        bad = _parity_file(tmp_path / "bad.json", record)
        assert main(["pack", "--parity", str(bad), "--out", str(out)]) == 1
        assert capsys.readouterr().err == (f"refused: parity record {bad}: {why}\n"
                                           "error: 1 runs or records refused (listed above); nothing packed\n")  # fmt: skip
        assert (out / "MANIFEST.json").read_bytes() == before
        assert (out / "parity.json").read_bytes() == good.read_bytes()
    assert main(["pack", "--out", str(out)]) == 2
    assert (
        capsys.readouterr().err == "error: nothing to pack: name experiments (folders of --multirun-dir) or --parity\n"
    )


@needs_git
def test_pack_adds_a_parity_record_of_another_reference_code_and_replace_drops_the_held_one(tmp_path, capsys):
    """A MIR-only harness record packed onto records holding Mammoth's rows keeps those, as a part with its own
    provenance (the manifest counts both); packed again it replaces MIR's part; ``--replace``: it alone."""
    mammoth = parity_record(PARITY_ACC, HEAD[0], HEAD[1])
    mir = parity_record({("er", "split_cifar10_jpeg"): {0: (40.0, 41.0)}}, HEAD[0], HEAD[1])
    mir["rows"][0]["reference"] = "mir"
    for s in mir["rows"][0]["seeds"]:
        s["mir"] = s.pop("mammoth")
    mir["provenance"].update(mir_commit="35eda78", cpu="Other CPU")
    del mir["provenance"]["mammoth_commit"]
    out = tmp_path / "records"
    assert main(["pack", "--parity", str(_parity_file(tmp_path / "m.json", mammoth)), "--out", str(out)]) == 0
    capsys.readouterr()
    assert main(["pack", "--parity", str(_parity_file(tmp_path / "r.json", mir)), "--out", str(out)]) == 0
    assert "parity.json: reference codes mammoth; mir (a part each" in capsys.readouterr().out
    assert rec.extract(out, tmp_path / "x").parity == {"parts": [mammoth, mir]}
    entry = json.loads((out / "MANIFEST.json").read_text())["parity"]
    assert {k: entry[k] for k in ("mammoth_commit", "mir_commit", "cpus", "rows", "pairs")} == {
        "mammoth_commit": "e75a491", "mir_commit": "35eda78", "cpus": {"Test CPU @ 1.00GHz": 3, "Other CPU": 1},
        "rows": 3, "pairs": 4}  # fmt: skip
    mir["rows"][0]["seeds"][0]["suite"] = mir["rows"][0]["seeds"][0]["mir"]
    assert main(["pack", "--parity", str(_parity_file(tmp_path / "r.json", mir)), "--out", str(out)]) == 0
    assert rec.extract(out, tmp_path / "y").parity == {"parts": [mammoth, mir]}
    assert main(["pack", "--replace", "--parity", str(tmp_path / "r.json"), "--out", str(out)]) == 0
    assert (out / "parity.json").read_bytes() == (tmp_path / "r.json").read_bytes()


# ----------------------------------------------------------------------------- reading back


def _archive(members: list[tarfile.TarInfo | tuple[str, bytes]]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        for m in members:
            if isinstance(m, tarfile.TarInfo):
                tf.addfile(m)
            else:
                info = tarfile.TarInfo(m[0])
                info.size = len(m[1])
                tf.addfile(info, io.BytesIO(m[1]))
    return buf.getvalue()


def _records(folder: Path, archives: dict[str, bytes]) -> Path:
    """A records folder holding ``archives`` and a manifest naming each with its sha256."""
    folder.mkdir(parents=True, exist_ok=True)
    entries = {}
    for name, data in archives.items():
        (folder / f"{name}.tar.gz").write_bytes(data)
        entries[name] = {"file": f"{name}.tar.gz", "sha256": sha256(data)}
    (folder / "MANIFEST.json").write_text(rec.manifest_text({"archives": entries}))
    return folder


def test_reading_back_refuses_missing_extra_changed_and_hostile_records(tmp_path):
    good = _archive([("grid.json", b"{}"), ("job/results.json", b"{}")])
    folder = _records(tmp_path / "r", {"e": good})
    assert rec.extract(folder, tmp_path / "x").manifest["archives"]["e"]["sha256"] == sha256(good)
    (folder / "other.tar.gz").write_bytes(good)
    with pytest.raises(rec.RecordsError, match=r"other.tar.gz: an archive that MANIFEST.json does not name"):
        rec.extract(folder, tmp_path / "x")
    (folder / "other.tar.gz").unlink()
    (folder / "e.tar.gz").write_bytes(_archive([("job/results.json", b"{ }")]))  # changed, manifest not
    with pytest.raises(rec.RecordsError, match=r"e.tar.gz: its sha256 \w+\.\.\. is not the one MANIFEST.json gives"):
        rec.extract(folder, tmp_path / "x")
    (folder / "e.tar.gz").unlink()
    with pytest.raises(rec.RecordsError, match=r"e.tar.gz: missing \(named by MANIFEST.json\)"):
        rec.extract(folder, tmp_path / "x")
    link = tarfile.TarInfo("job/results.json")
    link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
    folder_ = tmp_path / "h"
    for members, why in [
        ([link], "not a regular file"),
        ([("../results.json", b"{}")], "job folder '..' cannot be a folder name"),
        ([("/abs/results.json", b"{}")], "not grid.json nor"),
        ([("a/b/results.json", b"{}")], "not grid.json nor <job>/results.json or <job>/failed.json"),
        ([("job/run.log", b"x")], "not grid.json nor"),
        ([("grid.json", b"{}"), ("grid.json", b"[]")], "named twice"),
    ]:
        shutil.rmtree(folder_, ignore_errors=True)
        with pytest.raises(rec.RecordsError, match=f"member .*: {why}"):
            rec.extract(_records(folder_, {"e": _archive(members)}), tmp_path / "y")
        assert not (tmp_path / "y" / "e" / "job" / "results.json").exists() and not (tmp_path / "results.json").exists()
    (folder / "MANIFEST.json").write_text('{"archives": {"../e": {"file": "../e.tar.gz", "sha256": "0"}}}')
    with pytest.raises(rec.RecordsError, match=r"experiment '\.\./e' cannot be a folder name"):
        rec.extract(folder, tmp_path / "x")
    (folder / "MANIFEST.json").write_text('{"archives": {"e": {"file": "f.tar.gz", "sha256": "0"}}}')
    with pytest.raises(
        rec.RecordsError, match=r"not a manifest \(each archive: file <experiment>.tar.gz and its sha256\)"
    ):
        rec.extract(folder, tmp_path / "x")


def test_reading_back_refuses_a_missing_extra_changed_or_malformed_parity_record(tmp_path):
    folder = _records(tmp_path / "r", {"e": _archive([("grid.json", b"{}")])})
    manifest = json.loads((folder / "MANIFEST.json").read_text())
    assert rec.extract(folder, tmp_path / "x").parity is None  # none: the report's section says how to make one

    def name(record: dict | None, entry: dict | None = None) -> None:
        if record is not None:
            _parity_file(folder / "parity.json", record)
        data = (folder / "parity.json").read_bytes()
        parity = entry or {"file": "parity.json", "sha256": sha256(data)}
        (folder / "MANIFEST.json").write_text(rec.manifest_text({**manifest, "parity": parity}))

    record = parity_record(PARITY_ACC)
    _parity_file(folder / "parity.json", record)
    with pytest.raises(rec.RecordsError, match=r"parity.json: a parity record that MANIFEST.json does not name"):
        rec.extract(folder, tmp_path / "x")
    name(record)
    assert rec.extract(folder, tmp_path / "x").parity == record
    record["rows"][0]["seeds"][0]["mammoth"] = {"R": fake_R(5, 90.0).tolist(), "acc": 90.0}  # changed, manifest not
    _parity_file(folder / "parity.json", record)
    with pytest.raises(rec.RecordsError, match=r"parity.json: its sha256 \w+\.\.\. is not the one MANIFEST.json gives"):
        rec.extract(folder, tmp_path / "x")
    record["rows"][0]["seeds"][0]["mammoth"]["acc"] = 80.0  # forged, manifest made to match: its own check
    name(record)
    with pytest.raises(rec.RecordsError, match=r"parity.json: row 1 \(gss split_mnist mir_code\), seed 0, mammoth: acc "
                       r"80.0 is not the mean of R's last row \(90.0\)"):  # fmt: skip
        rec.extract(folder, tmp_path / "x")
    (folder / "parity.json").write_text("{")
    name(None)
    with pytest.raises(rec.RecordsError, match=r"parity.json: not valid JSON"):
        rec.extract(folder, tmp_path / "x")
    (folder / "parity.json").unlink()
    with pytest.raises(rec.RecordsError, match=r"parity.json: missing \(named by MANIFEST.json\)"):
        rec.extract(folder, tmp_path / "x")
    (folder / "MANIFEST.json").write_text(
        rec.manifest_text({**manifest, "parity": {"file": "../p.json", "sha256": "0"}})
    )
    with pytest.raises(
        rec.RecordsError, match=r"not a manifest \(its parity record: file parity.json and its sha256\)"
    ):
        rec.extract(folder, tmp_path / "x")


# ----------------------------------------------------------------------------- rebuilding


@needs_git
@pytest.mark.xdist_group("report")
def test_the_report_rebuilt_from_records_is_the_same_anywhere_and_the_check_catches_every_change(
    tmp_path, png_only, monkeypatch
):
    """`make report-docs` in one process and folder, `clsuite records check` in another: the same page and
    figures. Then each change the check must catch."""
    from clsuite.analysis import records as records_module

    checked: list[str] = []  # the report each check rebuilt, read before its temporary folder goes

    def rebuild_kept(records, into, crossmachine):
        built = rebuild(records, into, crossmachine)
        checked.append((into / "docs" / "REPRODUCTION.md").read_text() if built["docs"] else "")
        return built

    monkeypatch.setattr(records_module, "rebuild", rebuild_kept)  # (check's own rebuild)
    mr = tmp_path / "multirun"
    names = _suite(mr)
    records, docs, none = tmp_path / "records", tmp_path / "docs", tmp_path / "no-other-machines"
    parity = _parity_file(tmp_path / "parity.json", parity_record(PARITY_ACC, HEAD[0], HEAD[1]))
    assert pack(names, mr, records, parity) == []
    env = {**os.environ, "PYTHONHASHSEED": "0", "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])}
    p = subprocess.run(
        [sys.executable, "-m", "clsuite", "report", "--records", str(records), "--docs", str(docs), "--results-dir",
         str(tmp_path / "results"), "--crossmachine", str(none)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr[-3000:]
    text = (docs / "REPRODUCTION.md").read_text()
    assert f"<!-- GENERATED by {ORIGIN[True][0]} (clsuite.analysis.report): do not edit -->" in text
    assert f"`docs/records/MANIFEST.json` sha256 `{sha256((records / 'MANIFEST.json').read_bytes())}`" in text
    assert "To extend or rerun them: `clsuite paper table2 --seeds 5" in text  # commands in the installed form
    section = text[
        text.index(f"## {number('parity')}. Parity with the reference codes (Mammoth: GSS, iCaRL, HAL; MIR: ER, MIR)") :
    ]
    assert "### Acc (%) of the suite's classes and Mammoth's (e75a491) on the same split" in section
    assert "| GSS | split-MNIST | mir_code | 0, 1 | 82.0 ± 1.4 | 79.8 ± 0.4 |" in section
    built = rebuild(records, tmp_path / "again", none)  # another process (hash seed), folder and working directory
    again = tmp_path / "again" / "docs"
    assert built["docs"] and compare(again, docs) == []
    figures = sorted(p.name for p in (docs / "figures").iterdir())
    assert len(figures) >= 8 and all(f"](figures/{f})" in text for f in figures)

    hand = tmp_path / "hand"
    shutil.copytree(docs, hand)
    lines = text.splitlines()
    i = next(i for i, x in enumerate(lines) if x.startswith("| ER |"))
    (hand / "REPRODUCTION.md").write_text(
        "\n".join([*lines[:i], lines[i].replace("|", "| ", 2), *lines[i + 1 :]]) + "\n"
    )
    assert compare(again, hand) == [
        f"{hand / 'REPRODUCTION.md'}: line {i + 1} differs from the rebuilt report: "
        f"{lines[i].replace('|', '| ', 2)[:120]!r}, rebuilt {lines[i][:120]!r}"
    ]
    shutil.copy(docs / "REPRODUCTION.md", hand / "REPRODUCTION.md")
    (hand / "figures" / figures[0]).write_bytes(b"png")
    (hand / "figures" / figures[1]).unlink()
    assert compare(again, hand) == [
        f"{hand / 'figures' / figures[0]}: differs from the rebuilt figure",
        f"{hand / 'figures' / figures[1]}: missing",
    ]

    # a record changed and packed again (manifest and all): the committed report is stale
    job = mr / "table2" / TABLE2_JOB
    edit_run(job, lambda r: r.update(R=[[v - 1.0 if v > 1 else v for v in row] for row in r["R"]],
                                     metrics=all_metrics([[v - 1.0 if v > 1 else v for v in row] for row in r["R"]], r["b"])))  # fmt: skip
    stale = tmp_path / "stale"
    shutil.copytree(records, stale)
    assert pack(["table2"], mr, stale, replace=True) == []  # (a run made again: its record's copy replaced)
    (diff,) = check(stale, docs, none)
    assert diff.startswith(f"{docs / 'REPRODUCTION.md'}: line ") and "differs from the rebuilt report" in diff
    # the parity record changed and packed again: the same
    changed = parity_record({**PARITY_ACC, ("hal", "split_fmnist"): {0: (70.0, 72.0)}}, HEAD[0], HEAD[1])
    repacked = tmp_path / "repacked"
    shutil.copytree(records, repacked)
    assert pack([], mr, repacked, _parity_file(tmp_path / "changed.json", changed)) == []
    (diff,) = check(repacked, docs, none)  # (the first line that differs: the manifest's sha256)
    assert diff.startswith(f"{docs / 'REPRODUCTION.md'}: line ") and "differs from the rebuilt report" in diff
    # the report that check rebuilt from them (the same as rebuild(repacked, ...) writes)
    assert "| HAL | split-FMNIST | mir_code | 0 | 70.0 | 72.0 | -2.0 (n=1: no interval) | -2.0 | 68.7 |" in checked[-1]
    # ... the manifest left as it was: refused
    shutil.copy(records / "MANIFEST.json", repacked / "MANIFEST.json")
    (diff,) = check(repacked, docs, none)
    assert diff.startswith(f"{repacked / 'parity.json'}: its sha256 ") and diff.endswith("changed after it was packed")
    # the same change to a run, the manifest left as it was: refused before anything is built
    shutil.copy(stale / "table2.tar.gz", tmp_path / "t2")
    forged = tmp_path / "forged"
    shutil.copytree(records, forged)
    shutil.copy(tmp_path / "t2", forged / "table2.tar.gz")
    assert check(forged, docs, none) == [
        f"{forged / 'table2.tar.gz'}: its sha256 {sha256((tmp_path / 't2').read_bytes())[:16]}... is not the one "
        f"MANIFEST.json gives ({json.loads((records / 'MANIFEST.json').read_text())['archives']['table2']['sha256'][:16]}...): "
        "changed after it was packed"
    ]  # fmt: skip
    # a member edited without its seal, the manifest made to match: the report's reader leaves it out
    with tarfile.open(records / "table2.tar.gz") as tf:
        files = {m.name: tf.extractfile(m).read() for m in tf.getmembers()}
    member = f"{TABLE2_JOB}/results.json"
    files[member] = files[member].replace(b'"wall_time_s": 2.0', b'"wall_time_s": 1.0')
    unsealed = _records(tmp_path / "unsealed", {n: (records / f"{n}.tar.gz").read_bytes() for n in names})
    _records(unsealed, {"table2": rec.archive_bytes(files)})
    manifest = json.loads((records / "MANIFEST.json").read_text())["archives"]
    (unsealed / "MANIFEST.json").write_text(rec.manifest_text({"archives": {
        **manifest, "table2": {**manifest["table2"], "sha256": sha256((unsealed / "table2.tar.gz").read_bytes())}}}))  # fmt: skip
    assert check(unsealed, docs, none) == [
        f"the records do not rebuild a report for docs/: table2/{TABLE2_JOB}: left out (edited after it was written "
        "(its digest does not match its content))"
    ]
    # a record missing
    (forged / "table2.tar.gz").unlink()
    assert check(forged, docs, none) == [f"{forged / 'table2.tar.gz'}: missing (named by MANIFEST.json)"]
    assert main(["check", "--records", str(forged), "--docs", str(docs)]) == 1


def test_the_committed_records_read_whole(tmp_path):
    """docs/records/ reads back through every check, its manifest names the code of each archive, the
    parity record holds GSS, iCaRL and HAL on both benchmarks beside Mammoth e75a491 under portable
    kernels, and the CIFAR-10 (JPEG copy) rows: the first (older code) ER, MIR and AdaER at seeds 0-2, C-CMR
    and E-BRS at seed 0; the row of all five at seeds 0-4, at one code on one CPU kind."""
    from clsuite.analysis.load import load_experiment

    manifest = rec.read_manifest(RECORDS)[0]
    got = rec.extract(RECORDS, tmp_path)
    exps = {n: load_experiment(tmp_path / n) for n in manifest["archives"]}
    for n, e in exps.items():
        entry = manifest["archives"][n]
        assert e.status["rejected"] == [] and e.status["seed_duplicates"] == [], n
        assert set(e.runs["code"]) == set(entry["codes"]) and len(e.runs) == entry["runs"], n
        assert e.runs["real_data"].all(), n
    assert got.codes == {c: m for a in manifest["archives"].values() for c, m in a["codes"].items()}
    mammoth, mir = rec.parity_parts(got.parity)  # Mammoth's part (GSS, iCaRL, HAL), then MIR's code's (ER, MIR)
    assert mammoth["complete"] and mammoth["provenance"]["mammoth_commit"] == "e75a491"
    assert mammoth["provenance"]["numerics"]["mode"] == "portable" and not mammoth["provenance"]["suite_dirty"]
    assert [(r["method"], r["benchmark"]) for r in mammoth["rows"]] == [
        (m, b) for m in ("gss", "icarl", "hal") for b in ("split_mnist", "split_fmnist")
    ]
    assert mir["complete"] and mir["provenance"]["mir_commit"] == "35eda78" and not mir["provenance"]["suite_dirty"]
    assert [(r["method"], sorted(s["seed"] for s in r["seeds"])) for r in mir["rows"]] == [
        ("er", [0, 1, 2]),
        ("mir", [0, 1, 2]),
    ]
    assert all(s["suite"]["from"]["record"] == "cifar10_jpeg_row" for r in mir["rows"] for s in r["seeds"])
    assert manifest["parity"]["codes"] == {
        p["provenance"]["suite_code"]: p["provenance"]["suite_commit"][:10] for p in (mammoth, mir)
    }
    jpeg = exps["cifar10_jpeg_first_row"].runs
    assert set(jpeg["benchmark"]) == {"split_cifar10_jpeg"} and set(jpeg["reading"]) == {"mir_code"}
    seeds = jpeg.groupby("method")["seed"].apply(sorted).to_dict()
    assert all(seeds[m] == [0, 1, 2] for m in ("er", "mir", "adaer")) and seeds["ccmr"] == seeds["ebrs"] == [0], seeds
    jpeg = exps["cifar10_jpeg_row_before_mir_data"].runs  # the row at MIR's CIFAR line, one code and one CPU kind
    assert set(jpeg["benchmark"]) == {"split_cifar10_jpeg"} and set(jpeg["reading"]) == {"mir_code"}
    seeds = jpeg.groupby("method")["seed"].apply(sorted).to_dict()
    assert seeds == {m: [0, 1, 2, 3, 4] for m in ("adaer", "ccmr", "ebrs", "er", "mir")}, seeds
    assert jpeg["code"].nunique() == 1 and jpeg["cpu"].nunique() == 1 and jpeg["numerics"].nunique() == 1
    assert jpeg["numerics"].iloc[0].startswith("native (")  # this CPU's kernels, named with their levels


def _unchecked() -> str | None:
    """Why the committed report is not yet compared with its records (None: it is). It is, from the
    moment docs/records/ holds every section docs/ needs or docs/REPRODUCTION.md says it was built from
    records: removing records cannot switch the check off without editing the report as well."""
    have = set(rec.read_manifest(RECORDS)[0]["archives"])
    needed = {s.experiment for s in SECTIONS if not s.optional}
    built = f"GENERATED by {ORIGIN[True][0]}" in (ROOT / "docs" / "REPRODUCTION.md").read_text()
    if built or needed <= have:
        return None
    return (
        f"docs/records/ lacks {', '.join(sorted(needed - have))} and docs/REPRODUCTION.md was not built from "
        "records: run `make records`, then `make report-docs`, and commit docs/records/, docs/REPRODUCTION.md and docs/figures/"
    )


@pytest.mark.skipif(_unchecked() is not None, reason=str(_unchecked()))
@pytest.mark.xdist_group("report")
def test_the_committed_report_is_the_one_its_records_rebuild(tmp_path, png_only):
    """(PNG only: docs/figures/ holds no PDF, and check compares the figures the report shows.)"""
    assert check(RECORDS, ROOT / "docs", ROOT / "docs" / "crossmachine") == []


# ----------------------------------------------------------------------------- replaying


def _data_dir() -> Path:
    d = Path(os.environ.get("DATA_DIR") or ROOT.parent / "shared" / "datasets")
    return d if d.is_absolute() else ROOT / d


needs_mnist = pytest.mark.skipif(
    not (_data_dir() / "MNIST" / "raw" / "train-images-idx3-ubyte.gz").is_file(),
    reason=f"no MNIST files under DATA_DIR={_data_dir()} (set DATA_DIR to the folder of the data sets)",
)
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])}


def test_first_difference_names_the_first_cell_row_by_row_then_b():
    want = {"R": [[1.0, 0.0], [0.5, 2.0]], "b": [3.0, 4.0]}
    assert first_difference(want, json.loads(json.dumps(want))) is None
    assert first_difference({**want, "R": [[1.0, 0.0], [0.5, 2.0000000000000004]]}, want) == (
        "R[2,2] = 2.0000000000000004 here, 2.0 in the record"
    )
    assert first_difference({**want, "b": [3.0, 4.5]}, want) == "b[2] = 4.5 here, 4.0 in the record"
    assert first_difference({**want, "R": [[1.0, 0.0]]}, want) == "R has 1 rows here, 2 in the record"


def test_replay_refuses_bad_input_before_training(tmp_path, capsys):
    assert replay_main(["--sample", "0"]) == 2
    assert capsys.readouterr().err == "error: --sample must be a whole number >= 1, got 0\n"
    assert replay_main(["--records", str(tmp_path / "none")]) == 2
    assert "not a folder" in capsys.readouterr().err
    assert replay_main(["--records", str(RECORDS), "--methods", "no_such_method"]) == 2
    assert (
        capsys.readouterr().err
        == f"error: no portable run in {RECORDS} of the methods and benchmarks asked; nothing replayed\n"
    )


@needs_git
@needs_mnist
def test_replay_reruns_a_real_portable_run_bit_for_bit_and_names_a_forged_cell(tmp_path):
    """One short split-MNIST run of Online under portable kernels, recorded as it came (its provenance set
    to HEAD, so that packing takes it whatever this checkout's state), and a copy of it with one cell of R
    forged and sealed again: the replay gives the first record bit for bit and names the forged cell."""
    job = "online_seed0"
    mr = tmp_path / "multirun"
    run = [sys.executable, str(ROOT / "src" / "run.py"), "method=online", "trainer.numerics=portable", "logger=none",
           "benchmark.train_per_class=300", f"data.root={_data_dir()}", f"hydra.run.dir={mr / 'honest' / job}"]  # fmt: skip
    p = subprocess.run(run, cwd=tmp_path, env=ENV, capture_output=True, text=True, timeout=600, check=False)
    assert p.returncode == 0, p.stderr[-3000:]
    edit_run(mr / "honest" / job, lambda r: r["identity"].update(code={"hash": HEAD[1]}, provenance={**r["identity"]["provenance"], "commit": HEAD[0], "dirty": False}))  # fmt: skip
    shutil.copytree(mr / "honest", mr / "forged")

    def forge(r):
        r["R"][2][2] = 97.0 if r["R"][2][2] != 97.0 else 96.0
        r["metrics"] = {**r["metrics"], **all_metrics(r["R"], r["b"])}  # (task-IL metrics kept)

    edit_run(mr / "forged" / job, forge)
    forged = json.loads((mr / "forged" / job / "results.json").read_text())["R"][2][2]
    honest = json.loads((mr / "honest" / job / "results.json").read_text())["R"][2][2]
    assert pack(["honest", "forged"], mr, tmp_path / "records") == []
    p = subprocess.run([sys.executable, "-m", "clsuite", "replay", "--records", str(tmp_path / "records"),
                        "--data-dir", str(_data_dir())], cwd=tmp_path, env=ENV, capture_output=True, text=True,
                       timeout=600, check=False)  # fmt: skip
    lines = p.stdout.splitlines()
    assert p.returncode == 1, p.stderr[-3000:]
    assert lines[0].startswith("replaying 1 of the 1 portable runs (2 records) of ") and " on " in lines[0]
    assert lines[1].startswith("same CPU kind as the records (") and lines[1].endswith("): a same-machine check")
    assert lines[2].startswith(
        f"differs  forged/{job}: R[3,3] = {honest!r} here, {forged!r} in the record; recorded by"
    )
    assert lines[3].startswith(f"same     honest/{job} (")
    assert lines[4] == "1 runs replayed = 2 records (a run can be a record of several experiments): 1 the same, 1 not"


def test_replay_says_whether_it_crosses_machines_by_cpu_kind_clock_aside():
    xeon = "Intel(R) Xeon(R) Processor"
    assert cpu_kind(f"{xeon} @ 2.50GHz") == xeon and cpu_kind(None) == "unknown"
    assert (
        machine_line(xeon, [xeon, f"{xeon} @ 2.50GHz"])
        == f"same CPU kind as the records ({xeon}): a same-machine check"
    )
    assert machine_line("AMD EPYC", [xeon, xeon]) == f"this CPU: AMD EPYC; the records': {xeon}: a cross-machine check"
    assert machine_line(xeon, [xeon, "AMD EPYC"]) == (
        f"this CPU: {xeon}; the records': AMD EPYC, {xeon}: a cross-machine check"
    )


@needs_mnist
@pytest.mark.skipif(
    not any("portable" in a.get("numerics", {}) for a in rec.read_manifest(RECORDS)[0]["archives"].values()),
    reason="docs/records/ holds no portable run yet (make records)",
)
def test_a_fixed_sample_of_the_committed_records_replays_bit_for_bit(tmp_path):
    p = subprocess.run([sys.executable, "-m", "clsuite", "replay", "--sample", "2", "--seed", "0", "--methods", "online",
                        "--benchmarks", "split_mnist", "--data-dir", str(_data_dir())], cwd=tmp_path, env=ENV,
                       capture_output=True, text=True, timeout=600, check=False)  # fmt: skip
    assert p.returncode == 0, p.stdout + p.stderr[-3000:]


# ----------------------------------------------------------------------------- the plan


def test_the_records_plan_runs_every_report_sweep_portable_and_packs_their_folders(capsys):
    both = ["--benchmarks", "split_mnist,split_fmnist"]
    cells = ["cells_joint", "cells_agem_batch", "cells_agem_draw", "cells_agem_pool", "cells_agem_layout",
             "cells_agem_per_task"]  # fmt: skip
    parts = [p[:-1] for p in paper.records_plan()]
    assert {p[-1] for p in paper.records_plan()} == {"trainer.numerics=portable"}
    assert parts == [
        ["table2", "--seeds", "40", "--methods", "er,mir,ccmr,ebrs,adaer,gem", *both],
        ["table2", "--seeds", "10", "--reading", "paper_text,mir_code", *both],
        ["table2", "--seeds", "10", *both, "--experiment", "machines_portable"],
        *([t, "--seeds", "10", *both] for t in ("memory", "first_task", "tau", "ablation")),
        ["imbalance", "--seeds", "10", "--benchmarks", "split_fmnist"],
        ["choices", "--seeds", "10"],
        *([c, "--seeds", "10"] for c in cells),
    ]
    choices = [c.experiment for c in CHOICES]
    assert paper.experiments(paper.records_plan()) == [
        "table2", "machines_portable", "memory", "first_task", "tau", "ablation", "imbalance", *choices, *cells,
    ]  # fmt: skip
    sweeps = [cmd for p in paper.records_plan() for kind, cmd in paper.plan(p) if kind == "sweep"]
    assert len(sweeps) == 8 + len(cells) + len(choices) and all("trainer.numerics=portable" in s for s in sweeps)
    assert paper.main(["records", "--seeds", "3", "--reading", "paper_text"]) == 2
    assert capsys.readouterr().err == (
        "error: records fixes its seeds, readings, benchmarks and methods: no --seeds, --reading\n"
    )


@needs_mnist
def test_the_dry_run_counts_each_run_once_however_many_sweeps_share_it(tmp_path, monkeypatch):
    monkeypatch.setenv("DATA_DIR", str(_data_dir()))
    parts = [["tau", "--seeds", "1", "--benchmarks", "split_mnist", "trainer.numerics=portable"],
             ["table2", "--seeds", "2", "--methods", "adaer", "--benchmarks", "split_mnist", "trainer.numerics=portable"]]  # fmt: skip
    assert paper.count(parts, tmp_path) == (7, 6, 0)  # tau = 0.5, seed 0: Table II's AdaER run


def test_records_without_the_data_says_so_in_one_line_before_counting(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("DATA_DIR", str(tmp_path / "nowhere"))
    monkeypatch.chdir(tmp_path)
    for dry in (["--dry-run"], []):
        assert paper.main(["records", *dry]) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: ") and err.count("\n") == 1 and "nowhere" in err and "Traceback" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # no multirun/, no results/


def test_a_config_recorded_before_the_core_layout_names_todays_modules():
    """Records made before the science moved into ``clsuite.core`` name ``clsuite.methods...``: replay,
    eval and the cell checks read them as today's modules, and nothing else in the config changes."""
    old = {
        "method": {"replay": {"_target_": "clsuite.replay.random.RandomReplay"}, "name": "er"},
        "model": {"_target_": "clsuite.models.nets.MLP", "sizes": [784, 100]},
        "plugins": [{"_target_": "clsuite.methods.gem.GEM"}, {"_target_": "my_pkg.clsuite.methods.X"}],
        "benchmark": {"source": "MNIST"},
        "note": "clsuite.analysis.cells",
    }
    new = rec_as_today(old)
    assert new["method"] == {"replay": {"_target_": "clsuite.core.replay.random.RandomReplay"}, "name": "er"}
    assert new["model"] == {"_target_": "clsuite.core.models.nets.MLP", "sizes": [784, 100]}
    assert new["plugins"] == [{"_target_": "clsuite.core.methods.gem.GEM"}, {"_target_": "my_pkg.clsuite.methods.X"}]
    assert new["benchmark"] == old["benchmark"] and new["note"] == old["note"]
    assert rec_as_today(new) == new  # (today's configs pass unchanged)
    import importlib

    module, _, name = new["model"]["_target_"].rpartition(".")
    assert getattr(importlib.import_module(module), name).__name__ == "MLP"


def test_replay_finds_the_data_by_every_commands_rule(monkeypatch):
    """Without --data-dir, replay reads the data sets where every command does (clsuite.config.home.data_dir:
    $DATA_DIR, else ../shared/datasets when it exists, else data/), not data/ alone."""
    import clsuite.run.replay as rr

    seen = []
    monkeypatch.setattr(rr, "data_dir", lambda: "/nonexistent/by-the-rule")
    monkeypatch.setattr(rr, "_replay_all", lambda drawn, of, tmp, a: seen.append(a.data_dir) or 0)
    assert (
        rr.main(["--records", str(RECORDS), "--sample", "1", "--methods", "online", "--benchmarks", "split_mnist"]) == 0
    )
    assert seen == ["/nonexistent/by-the-rule"]
