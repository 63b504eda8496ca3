"""``clsuite records``: pack experiments into records (``clsuite.run.archive``), and check that the
committed report is the one its records rebuild (docs/INTEGRITY.md, section 8).

What :func:`pack` refuses and what :func:`check` compares, byte for byte: docs/INTEGRITY.md, section 8.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

from clsuite.analysis.docs_gate import code_at
from clsuite.analysis.load import files, load_experiment
from clsuite.analysis.report import build_report
from clsuite.config.check import ConfigError
from clsuite.config.home import CHECKOUT
from clsuite.config.numerics import label as numerics_label
from clsuite.config.paths import safe_name
from clsuite.core.errors import fail
from clsuite.run import archive as rec
from clsuite.run.io import (
    FAILED_FILE,
    GRID_FILE,
    RESULTS_FILE,
    Unreadable,
    parse_json,
    read_object,
    read_regular,
    scratch_dir,
    sha256,
    write_bytes_atomic,
)

REPORT = "REPRODUCTION.md"
FIGURE = re.compile(r"\]\(figures/([^)\s]+)\)")  # a figure the report shows: ![...](figures/<name>)


def _counts(col) -> dict:
    return {str(k): int(v) for k, v in sorted(col.value_counts().items())}


def not_its_commit(code: str, commit: str, commits: dict[str, str | None]) -> str | None:
    """Why ``code`` is not the code of ``commit`` (``abc1234567``, ``...+dirty``, ``unknown``), or None when
    it is; ``commits``: ``{commit: its code hash}``, filled as commits are met (git is asked once each)."""
    unclean = commit.endswith("+dirty") or commit == "unknown"
    if commit not in commits:
        commits[commit] = None if unclean else code_at(commit)
    if commits[commit] == code:
        return None
    why = ("uncommitted changes, or no git commit" if unclean else "a commit this git checkout lacks"
           if commits[commit] is None else f"that commit's code is {commits[commit]}")  # fmt: skip
    return f"made by code {code}, not the code of its commit {commit} ({why})"


def parity_entry(path: Path, commits: dict[str, str | None], held: dict | None = None) -> tuple[bytes, dict, list[str]]:
    """``(bytes, manifest entry less the file's own fields, refusals)`` of the parity record at ``path``
    (``make parity``) merged into ``held`` (the records' parity record, when it is kept: its parts of the other
    reference codes stay; ``clsuite.run.archive.merge_parity``): one that fails its checks, is incomplete, or
    whose code is not its commit's is refused."""
    where = f"parity record {path}"
    try:
        data = read_regular(path)
        record = parse_json(data)
    except (FileNotFoundError, Unreadable) as e:
        return b"", {}, [f"{where}: {'missing' if isinstance(e, FileNotFoundError) else e}"]
    if why := rec.parity_problem(record):
        return data, {}, [f"{where}: {why}"]
    if "parts" not in record and held is not None:
        record = rec.merge_parity(held, record)
        data = (json.dumps(record, indent=1) + "\n").encode()
    entry: dict = {"codes": {}, "cpus": {}, "numerics": {}, "rows": 0, "pairs": 0}
    refused = []
    for part in rec.parity_parts(record):
        p = part["provenance"]
        commit = (
            f"{p['suite_commit'][:10]}{'+dirty' if p.get('suite_dirty') else ''}"
            if p.get("suite_commit")
            else "unknown"
        )
        refused += [] if part["complete"] else [f"{where}: incomplete (the harness was stopped): run it again"]
        refused += [f"{where}: {why}"] if (why := not_its_commit(p["suite_code"], commit, commits)) else []
        pairs = sum(len(r["seeds"]) for r in part["rows"])
        entry.update({k: p[k] for k in (f"{r}_commit" for r in rec.REFERENCES) if k in p})
        entry["codes"][p["suite_code"]] = commit
        for key, value in (("cpus", p["cpu"]), ("numerics", numerics_label(p["numerics"]))):
            entry[key][value] = entry[key].get(value, 0) + pairs
        entry["rows"], entry["pairs"] = entry["rows"] + len(part["rows"]), entry["pairs"] + pairs
    return data, entry, refused


def gather(exp_dir: Path, commits: dict[str, str | None]) -> tuple[dict[str, bytes], dict, list[str]]:
    """``({member: bytes}, manifest entry less the archive's own fields, refusals)`` of one experiment
    folder; ``commits``: ``{commit: its code hash}``, filled as commits are met (git is asked once each)."""
    name = exp_dir.name
    e = load_experiment(exp_dir)
    refused = [f"{name}/{r['job']}: left out by the report ({r['reason']})" for r in e.status["rejected"]]
    refused += [" and ".join(f"{name}/{j}" for j in sorted((d["job"], d["kept"]))) + ": two runs of one seed of a "
                "cell: a record holds one (move the other away)" for d in e.status["seed_duplicates"]]  # fmt: skip
    for _, run in e.runs.iterrows():
        where = f"{name}/{run['job']}"
        if not run["real_data"]:
            refused.append(f"{where}: not on the real data set (synthetic, or a data file without md5)")
        if why := not_its_commit(str(run["code"]), str(run["commit"]), commits):
            refused.append(f"{where}: {why}")
    members = {}
    grid = exp_dir / GRID_FILE
    if grid.is_file():
        if read_object(grid) is None:
            refused.append(f"{name}/{GRID_FILE}: not a JSON object")
        members[GRID_FILE] = read_regular(grid)
    results = files(exp_dir, RESULTS_FILE)
    failed = [p for p in files(exp_dir, FAILED_FILE) if not (p.parent / RESULTS_FILE).is_file()]
    for path in results + failed:
        member = path.relative_to(exp_dir).as_posix()
        if problem := rec.member_problem(member):
            refused.append(f"{name}/{member}: cannot be a member of a record ({problem})")
        else:
            members[member] = read_regular(path)
    runs = e.runs
    entry = {
        "results_files": len(results),
        "runs": len(runs),
        "codes": {str(c): str(m) for c, m in sorted(set(zip(runs["code"], runs["commit"])))} if len(runs) else {},
        "numerics": _counts(runs["numerics"]) if len(runs) else {},
        "cpus": _counts(runs["cpu"]) if len(runs) else {},
    }
    return members, entry, refused


def on_record(archive: bytes, where: str, exp_dir: Path, dest: Path) -> list[str]:
    """``dest`` filled with the record ``archive`` (read from ``where``) and, on top, ``exp_dir``'s record
    files (its ``grid.json`` replaces the record's); a refusal for each job file that both hold with other
    bytes (a run made again) and for each file that cannot be a member."""
    rec.unpack(archive, where, dest)
    name, refused = exp_dir.name, []
    for path in [*files(exp_dir, RESULTS_FILE), *files(exp_dir, FAILED_FILE), exp_dir / GRID_FILE]:
        member = path.relative_to(exp_dir).as_posix()
        if not path.is_file():
            continue
        if problem := rec.member_problem(member):
            refused.append(f"{name}/{member}: cannot be a member of a record ({problem})")
            continue
        data, target = read_regular(path), dest / member
        if path.name != GRID_FILE and target.is_file() and read_regular(target) != data:
            refused.append(f"{name}/{member}: differs from its copy in {where} (a run made again): move one "
                           "away, or pack with --replace to write the folder alone")  # fmt: skip
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    return refused


def pack(names: list[str], multirun: Path, out: Path, parity: Path | None = None, replace: bool = False) -> list[str]:
    """Pack the experiments ``names`` of ``multirun`` and the parity record ``parity`` into ``out``
    (archives, ``parity.json``, manifest); the refusals (nothing written when there are any). An
    experiment that ``out`` holds already keeps its record's runs, the folder's added (:func:`on_record`), and
    its parity record the rows of the reference codes ``parity`` has none of (:func:`parity_entry`);
    ``replace``: the folder and ``parity`` alone. ``ConfigError``: a name that is no experiment folder; ``RecordsError``:
    records in ``out`` that cannot be read."""
    for n in names:
        safe_name(n, "experiment")
        if not (Path(multirun) / n).is_dir():
            raise ConfigError(f"experiment {n!r}: no folder {Path(multirun) / n}/")
    manifest = rec.read_manifest(out)[0] if (Path(out) / rec.MANIFEST_FILE).exists() else {"archives": {}}
    held = {} if replace or not any(n in manifest["archives"] for n in names) else rec.verified(out, manifest)
    commits: dict[str, str | None] = {}
    packed, refused = {}, []
    for n in dict.fromkeys(names):
        with scratch_dir("clsuite-pack-") as tmp:
            exp_dir = Path(multirun) / n
            if n in held:
                refused += on_record(held[n], str(Path(out) / manifest["archives"][n]["file"]), exp_dir, Path(tmp) / n)
                exp_dir = Path(tmp) / n
            members, entry, why = gather(exp_dir, commits)
        refused += why
        packed[n] = (rec.archive_bytes(members), entry)
    if parity is not None:
        held = None if replace or "parity" not in manifest else rec.read_parity(out, manifest)
        parity_bytes, parity_meta, why = parity_entry(Path(parity), commits, held)
        refused += why
    if refused:
        return refused
    for n, (data, entry) in packed.items():
        write_bytes_atomic(Path(out) / f"{n}{rec.SUFFIX}", data)
        manifest["archives"][n] = {"file": f"{n}{rec.SUFFIX}", "sha256": sha256(data), "bytes": len(data), **entry}
    if parity is not None:
        write_bytes_atomic(Path(out) / rec.PARITY_FILE, parity_bytes)
        manifest["parity"] = {"file": rec.PARITY_FILE, "sha256": sha256(parity_bytes), "bytes": len(parity_bytes),
                              **parity_meta}  # fmt: skip
    manifest["about"] = ABOUT
    write_bytes_atomic(Path(out) / rec.MANIFEST_FILE, rec.manifest_text(manifest).encode())
    return []


def rename(records: Path, old: str, new: str) -> None:
    """The archive ``old`` of ``records`` renamed ``new``: its file moved and its manifest entry with it, the
    bytes, sha256 and every other field unchanged. The sealed files inside keep the experiment they were run
    under (``config.experiment``, ``grid.json``); the archive's name is the folder it unpacks to, so the
    report's section titles, figure names and paths follow it. ``ConfigError``: a bad name, no such archive,
    or one named ``new`` already; ``RecordsError``: a manifest that cannot be read, or an archive whose
    sha256 is not the manifest's."""
    safe_name(new, "experiment")
    records = Path(records)
    manifest = rec.read_manifest(records)[0]
    archives = manifest["archives"]
    if old not in archives:
        raise ConfigError(
            f"no archive {old!r} in {records / rec.MANIFEST_FILE} (it names {', '.join(sorted(archives))})"
        )
    if new in archives or (records / f"{new}{rec.SUFFIX}").exists():
        raise ConfigError(f"{records / f'{new}{rec.SUFFIX}'}: an archive of that name exists already")
    rec.verified(records, manifest)  # every archive there, with the manifest's sha256
    archives[new] = {**archives.pop(old), "file": f"{new}{rec.SUFFIX}"}
    (records / f"{old}{rec.SUFFIX}").rename(records / f"{new}{rec.SUFFIX}")
    write_bytes_atomic(records / rec.MANIFEST_FILE, rec.manifest_text(manifest).encode())


ABOUT = (
    "Records of the reproduction report: <experiment>.tar.gz holds that experiment's sealed results files as its "
    "sweep wrote them (clsuite records pack); parity.json: the suite's GSS, iCaRL and HAL beside Mammoth's (make parity; "
    "clsuite records pack --parity); make report-docs rebuilds docs/REPRODUCTION.md from them, make replay reruns a "
    "sample of their portable runs (docs/INTEGRITY.md, section 8)."
)


def rebuild(records: Path, into: Path, crossmachine: Path) -> dict:
    """docs/REPRODUCTION.md and its figures built from ``records`` into ``into/docs`` (``build_report``)."""
    return build_report(into / "multirun", into / "results", into / "docs", crossmachine, None, records)


def compare(built: Path, docs: Path) -> list[str]:
    """Each difference between the report and figures in ``built`` and those in ``docs``, one line each."""
    new, old = built / REPORT, docs / REPORT
    if not old.is_file():
        return [f"{old}: missing"]
    a, b = new.read_text().splitlines(), old.read_text().splitlines()
    if a != b:
        i = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
        rebuilt, committed = (a[i] if i < len(a) else "<end>"), (b[i] if i < len(b) else "<end>")
        return [f"{old}: line {i + 1} differs from the rebuilt report: {committed[:120]!r}, rebuilt {rebuilt[:120]!r}"]
    out = []
    for name in sorted(set(FIGURE.findall(new.read_text()))):
        mine, theirs = built / "figures" / name, docs / "figures" / name
        if not theirs.is_file():
            out.append(f"{theirs}: missing")
        elif read_regular(theirs) != read_regular(mine):
            out.append(f"{theirs}: differs from the rebuilt figure")
    return out


def check(records: Path, docs: Path, crossmachine: Path) -> list[str]:
    """:func:`compare` of the report rebuilt from ``records`` with ``docs``; a record that fails its
    checks, or a report the gate keeps out of docs/, is the one difference."""
    with scratch_dir("clsuite-rebuild-") as tmp:
        try:
            res = rebuild(records, Path(tmp), crossmachine)
        except rec.RecordsError as e:
            return [str(e)]
        if not res["docs"]:
            why = res["ungated"][:1] or [
                f"section '{s.title}' has no records" for s in res["missing"] if not s.optional
            ]
            return [f"the records do not rebuild a report for docs/: {why[0]}"]
        return compare(Path(tmp) / "docs", docs)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="clsuite records", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="what", required=True)
    p = sub.add_parser("pack", help="experiments of --multirun-dir -> <out>/<experiment>.tar.gz + MANIFEST.json")
    p.add_argument("experiments", nargs="*", help="folders of --multirun-dir, e.g. table2 memory")
    p.add_argument("--multirun-dir", default="multirun")
    p.add_argument("--parity", help="also the parity record make parity wrote (results/parity/parity.json)")
    p.add_argument("--replace", action="store_true",
                   help="write each archive from its folder alone (default: the folder's runs added to the archive's)")  # fmt: skip
    p.add_argument(
        "--out", default=str(CHECKOUT / "docs" / "records"), help="the records folder (default docs/records)"
    )
    r = sub.add_parser("rename", help="rename an archive and its manifest entry (bytes and sha256 unchanged)")
    r.add_argument("old", help="the archive's experiment name, e.g. table2")
    r.add_argument("new", help="its new name")
    r.add_argument("--records", default=str(CHECKOUT / "docs" / "records"))
    c = sub.add_parser("check", help="rebuild docs/REPRODUCTION.md and its figures from the records; compare")
    c.add_argument("--records", default=str(CHECKOUT / "docs" / "records"))
    c.add_argument("--docs", default=str(CHECKOUT / "docs"))
    a = ap.parse_args(argv)
    if a.what == "pack":
        if not a.experiments and not a.parity:
            return fail("nothing to pack: name experiments (folders of --multirun-dir) or --parity")
        try:
            before = rec.read_manifest(Path(a.out))[0]["archives"] if (Path(a.out) / rec.MANIFEST_FILE).exists() else {}
            refused = pack(a.experiments, Path(a.multirun_dir), Path(a.out), a.parity and Path(a.parity), a.replace)
        except ConfigError as e:
            return fail(str(e))
        except rec.RecordsError as e:
            return fail(f"{e}; nothing packed", status=1)
        for line in refused:
            print(f"refused: {line}", file=sys.stderr)
        if refused:
            return fail(f"{len(refused)} runs or records refused (listed above); nothing packed", status=1)
        after = rec.read_manifest(Path(a.out))[0]["archives"]
        for n in dict.fromkeys(a.experiments):
            was = f"; {before[n]['runs']} in its record before" if n in before else ""
            how = "the folder's alone" if a.replace or n not in before else "its record's and the folder's"
            print(f"{n}: {after[n]['runs']} runs, {how} ({Path(a.multirun_dir) / n}){was}")
        if a.parity:
            record = rec.read_parity(Path(a.out), rec.read_manifest(Path(a.out))[0])
            refs = "; ".join(", ".join(rec.parity_references(p)) for p in rec.parity_parts(record))
            print(f"{rec.PARITY_FILE}: reference codes {refs} (a part each: its own code, CPU and kernels)")
        print(Path(a.out) / rec.MANIFEST_FILE)
        return 0
    if a.what == "rename":
        try:
            rename(Path(a.records), a.old, a.new)
        except ConfigError as e:
            return fail(str(e))
        except rec.RecordsError as e:
            return fail(f"{e}; nothing renamed", status=1)
        print(f"{Path(a.records) / a.new}{rec.SUFFIX} (was {a.old}{rec.SUFFIX}; the same bytes)")
        return 0
    docs = Path(a.docs)
    problems = check(Path(a.records), docs, docs / "crossmachine")
    for line in problems:
        print(f"differs: {line}", file=sys.stderr)
    if not problems:
        print(f"same: {docs / REPORT} and its figures are the report its records rebuild")
    return 1 if problems else 0
