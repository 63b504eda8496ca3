"""Records: an experiment's sealed results files in one reproducible archive, the parity record, and the
manifest naming each one's sha256; packed and read back with every check (docs/INTEGRITY.md, section 8).
"""

from __future__ import annotations

import gzip
import io
import json
import math
import tarfile
from dataclasses import dataclass
from pathlib import Path

from clsuite.config.paths import MAX_DIRNAME, safe_name
from clsuite.core.errors import ConfigError
from clsuite.run.io import FAILED_FILE, GRID_FILE, MAX_BYTES, RESULTS_FILE, Unreadable, parse_json, read_regular, sha256

MANIFEST_FILE = "MANIFEST.json"
PARITY_FILE = "parity.json"  # the parity record (scripts/parity/harness.py writes it; clsuite.analysis.parity)
SUFFIX = ".tar.gz"
JOB_FILES = (RESULTS_FILE, FAILED_FILE)  # a job folder's files that a record keeps
MAX_ARCHIVE = 1 << 30  # bytes of one archive, compressed and unpacked alike
MAX_MEMBERS = 200_000


class RecordsError(Exception):
    """Records that are not read: a missing, extra, forged or malformed archive, or a bad manifest (one line)."""


def member_problem(name: str) -> str | None:
    """Why ``name`` cannot be a member of a record (None when it can): ``grid.json`` or
    ``<job>/<results.json | failed.json>`` with ``<job>`` a job folder's name (``clsuite.config.paths.safe_name``, up to the sweep's ``MAX_DIRNAME``)."""
    if name == GRID_FILE:
        return None
    job, _, leaf = name.partition("/")
    if leaf not in JOB_FILES:
        return f"not {GRID_FILE} nor <job>/{' or <job>/'.join(JOB_FILES)}"
    try:
        safe_name(job, "job folder", MAX_DIRNAME)
    except ConfigError as e:
        return str(e)
    return None


def archive_bytes(files: dict[str, bytes]) -> bytes:
    """A tar.gz of ``files`` (``{member name: bytes}``), the same bytes for the same files: members in
    name order, mode 0644, owner 0, mtime 0, no user names, gzip without a file name or time."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tf:
        for name in sorted(files):
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(files[name]), 0o644, 0
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            tf.addfile(info, io.BytesIO(files[name]))
    return gzip.compress(buf.getvalue(), compresslevel=9, mtime=0)


def read_manifest(records_dir: Path) -> tuple[dict, str]:
    """``MANIFEST.json`` of ``records_dir`` (``{"archives": {experiment: {"file", "sha256", ...}}}``)
    and the sha256 of its bytes."""
    path = Path(records_dir) / MANIFEST_FILE
    try:
        text = read_regular(path)
        manifest = parse_json(text)
    except FileNotFoundError:
        raise RecordsError(f"{path}: missing (no records there)") from None
    except Unreadable as e:
        raise RecordsError(f"{path}: {e}") from None
    archives = manifest.get("archives") if isinstance(manifest, dict) else None
    if not isinstance(archives, dict) or not all(
        isinstance(v, dict) and v.get("file") == f"{k}{SUFFIX}" and isinstance(v.get("sha256"), str)
        for k, v in archives.items()
    ):
        raise RecordsError(f"{path}: not a manifest (each archive: file <experiment>{SUFFIX} and its sha256)")
    for k in archives:
        try:
            safe_name(k, "experiment")
        except ConfigError as e:
            raise RecordsError(f"{path}: {e}") from None
    parity = manifest.get("parity")
    if parity is not None and not (
        isinstance(parity, dict) and parity.get("file") == PARITY_FILE and isinstance(parity.get("sha256"), str)
    ):
        raise RecordsError(f"{path}: not a manifest (its parity record: file {PARITY_FILE} and its sha256)")
    return manifest, sha256(text)


def manifest_text(manifest: dict) -> str:
    """The manifest as written: one text per content (sorted keys)."""
    return json.dumps(manifest, indent=1, sort_keys=True) + "\n"


def _named_bytes(path: Path, digest: str, limit: int) -> bytes:
    """The bytes of ``path``, a file the manifest names with the sha256 ``digest``; ``RecordsError`` otherwise."""
    try:
        data = read_regular(path, limit)
    except FileNotFoundError:
        raise RecordsError(f"{path}: missing (named by {MANIFEST_FILE})") from None
    except Unreadable as e:
        raise RecordsError(f"{path}: {e}") from None
    if sha256(data) != digest:
        raise RecordsError(f"{path}: its sha256 {sha256(data)[:16]}... is not the one {MANIFEST_FILE} gives "
                           f"({digest[:16]}...): changed after it was packed")  # fmt: skip
    return data


def verified(records_dir: Path, manifest: dict) -> dict[str, bytes]:
    """``{experiment: archive bytes}``, each archive the manifest names, whose sha256 it gives;
    ``RecordsError`` for a missing or changed archive, or one the manifest does not name."""
    records_dir = Path(records_dir)
    named = manifest["archives"]
    extra = sorted(p.name for p in records_dir.glob(f"*{SUFFIX}") if p.name[: -len(SUFFIX)] not in named)
    if extra:
        raise RecordsError(f"{records_dir / extra[0]}: an archive that {MANIFEST_FILE} does not name")
    return {exp: _named_bytes(records_dir / e["file"], e["sha256"], MAX_ARCHIVE) for exp, e in sorted(named.items())}


def _number(v) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


def _side_problem(side) -> str | None:
    """Why one side of a seed (``{"R": T x T accuracies, "acc": the mean of R's last row}``) is not one."""
    R = side.get("R") if isinstance(side, dict) else None
    if not (isinstance(R, list) and R and all(isinstance(r, list) and len(r) == len(R) for r in R)
            and all(_number(v) for r in R for v in r)):  # fmt: skip
        return "R is not a square matrix of numbers"
    if not _number(side.get("acc")) or abs(side["acc"] - sum(R[-1]) / len(R)) > 1e-9:
        return f"acc {side.get('acc')!r} is not the mean of R's last row ({sum(R[-1]) / len(R)!r})"
    return None


REFERENCES = ("mammoth", "mir")  # a parity row's reference code: its seeds' other side, and <name>_commit


def reference_of(row: dict) -> str:
    """The reference code of a parity row (``"reference"``; a row without one is Mammoth's)."""
    return row.get("reference", "mammoth")


def parity_parts(record: dict) -> list[dict]:
    """The harness records that ``record`` holds: itself, or its ``parts`` (:func:`merge_parity`)."""
    return record.get("parts", [record])


def parity_references(part: dict) -> list[str]:
    """The reference codes of a harness record's rows, in :data:`REFERENCES` order."""
    return [r for r in REFERENCES if any(reference_of(row) == r for row in part["rows"])]


def merge_parity(held: dict, new: dict) -> dict:
    """``held`` with ``new`` added: a reference code's rows come from the last harness record that has any
    (``new``'s replace ``held``'s, whole: each part keeps its own provenance, the code, CPU and kernels it
    ran with); one part is the record itself, more are ``{"parts": [...]}``, ordered by reference code."""
    replaced = set(parity_references(new))
    kept = [p for p in parity_parts(held) if not replaced & set(parity_references(p))]
    parts = sorted([*kept, new], key=lambda p: [REFERENCES.index(r) for r in parity_references(p)])
    return parts[0] if len(parts) == 1 else {"parts": parts}


def parity_problem(record) -> str | None:
    """Why ``record`` is not a parity record (None when it is): a harness record (below) or ``{"parts":
    [harness record, ...]}`` with each reference code's rows in one part (:func:`merge_parity`)."""
    if isinstance(record, dict) and "parts" in record:
        parts = record["parts"]
        if set(record) != {"parts"} or not isinstance(parts, list) or len(parts) < 2:
            return "not a parity record (parts: two or more harness records, nothing beside them)"
        for i, part in enumerate(parts, 1):
            if why := _harness_record_problem(part):
                return f"part {i}: {why}"
        refs = [r for part in parts for r in parity_references(part)]
        if len(set(refs)) != len(refs) or not all(parity_references(p) for p in parts):
            return f"its parts' reference codes {refs} repeat, or a part has no rows"
        return None
    return _harness_record_problem(record)


def _harness_record_problem(record) -> str | None:
    """Why ``record`` is not what the harness writes (None when it is): ``{"provenance": {"suite_code",
    "<reference>_commit", "cpu", "numerics", ...}, "complete", "rows": [{"method", "benchmark", "reading",
    ["reference": "mir"], "seeds": [{"seed", "suite": side, "<reference>": side}, ...], ...}]}`` with each
    side's Acc the mean of the last row of its R, one entry per seed of a row and one row per (method,
    benchmark, reading, reference); the reference of a row (:data:`REFERENCES`) is Mammoth unless it says."""
    prov = record.get("provenance") if isinstance(record, dict) else None
    if (
        not isinstance(prov, dict)
        or not isinstance(record.get("rows"), list)
        or not isinstance(record.get("complete"), bool)
    ):
        return "not a parity record (provenance, complete, rows)"
    refs = [reference_of(r) if isinstance(r, dict) else None for r in record["rows"]]
    if bad := [r for r in refs if r is not None and r not in REFERENCES]:
        return f"a row's reference {bad[0]!r} is none of {', '.join(REFERENCES)}"
    used = [r for r in REFERENCES if r in refs] or ["mammoth"]  # (a record of no rows: Mammoth's form)
    needed = ("suite_code", *(f"{r}_commit" for r in used), "cpu")
    missing = [k for k in needed if not isinstance(prov.get(k), str)]
    if missing or not isinstance(prov.get("numerics"), dict):
        return f"its provenance lacks {', '.join(missing) or 'numerics'}"
    cells = set()
    for i, (row, ref) in enumerate(zip(record["rows"], refs, strict=True), 1):
        keys = tuple(row.get(k) for k in ("method", "benchmark", "reading")) if isinstance(row, dict) else (None,)
        if not all(isinstance(k, str) for k in keys) or not isinstance(row.get("seeds"), list) or not row["seeds"]:
            return f"row {i}: not a row (method, benchmark, reading, seeds)"
        if (*keys, ref) in cells:
            return f"row {i}: {' '.join(keys)} is in another row too"
        cells.add((*keys, ref))
        seeds = [s.get("seed") if isinstance(s, dict) else None for s in row["seeds"]]
        if not all(isinstance(s, int) and not isinstance(s, bool) for s in seeds) or len(set(seeds)) != len(seeds):
            return f"row {i}: its seeds {seeds} are not distinct whole numbers"
        for s in row["seeds"]:
            for side in ("suite", ref):
                if why := _side_problem(s.get(side)):
                    return f"row {i} ({' '.join(keys)}), seed {s['seed']}, {side}: {why}"
    return None


def safe_members(tf: tarfile.TarFile, where: str) -> list[tarfile.TarInfo]:
    """The members of an archive, each checked (:func:`member_problem`, a regular file, bounded in
    size and number, named once); ``RecordsError`` at the first that is not."""
    out, seen, total = [], set(), 0
    for m in tf:
        problem = member_problem(m.name) or (None if m.isreg() else "not a regular file")
        if not problem and m.size > MAX_BYTES:
            problem = f"larger than {MAX_BYTES} bytes"
        if not problem and m.name in seen:
            problem = "named twice"
        total += max(m.size, 0)
        if not problem and (total > MAX_ARCHIVE or len(out) >= MAX_MEMBERS):
            problem = f"the archive unpacks to more than {MAX_ARCHIVE} bytes or {MAX_MEMBERS} files"
        if problem:
            raise RecordsError(f"{where}: member {m.name!r}: {problem}")
        seen.add(m.name)
        out.append(m)
    return out


@dataclass(frozen=True)
class Records:
    """Records read back: their manifest, the sha256 of its file, the archives' bytes in all."""

    manifest: dict
    sha256: str
    size: int
    parity: dict | None = None  # the parity record, when the manifest names one

    @property
    def codes(self) -> dict[str, str]:
        """``{code hash: commit}`` of every archive."""
        return {c: m for a in self.manifest["archives"].values() for c, m in (a.get("codes") or {}).items()}


def unpack(data: bytes, where: str, dest: Path) -> None:
    """The archive ``data`` (read from ``where``) unpacked into ``dest`` after :func:`safe_members`'s
    checks; ``RecordsError`` at the first that fails."""
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tf:
            members = safe_members(tf, where)
            tf.extractall(dest, members=members, filter="data")
    except (tarfile.TarError, OSError, EOFError) as e:
        raise RecordsError(f"{where}: not a readable tar.gz ({type(e).__name__}: {str(e)[:200]})") from None


def extract(records_dir: Path, dest: Path) -> Records:
    """Every archive of ``records_dir`` unpacked into ``dest/<experiment>/`` after the checks of the
    module's opening. ``RecordsError`` (nothing trusted) at the first check that fails."""
    manifest, digest = read_manifest(records_dir)
    archives = verified(records_dir, manifest)
    parity = read_parity(records_dir, manifest)
    for exp, data in archives.items():
        unpack(data, str(Path(records_dir) / manifest["archives"][exp]["file"]), Path(dest) / exp)
    return Records(manifest, digest, sum(len(d) for d in archives.values()), parity)


def read_parity(records_dir: Path, manifest: dict) -> dict | None:
    """The parity record of ``records_dir`` when ``manifest`` names it (its sha256, :func:`parity_problem`);
    None when neither names nor holds one. ``RecordsError`` for one it holds but does not name, or one that fails."""
    path = Path(records_dir) / PARITY_FILE
    if "parity" not in manifest:
        if path.exists() or path.is_symlink():
            raise RecordsError(f"{path}: a parity record that {MANIFEST_FILE} does not name")
        return None
    try:
        record = parse_json(_named_bytes(path, manifest["parity"]["sha256"], MAX_BYTES))
    except Unreadable as e:
        raise RecordsError(f"{path}: {e}") from None
    if why := parity_problem(record):
        raise RecordsError(f"{path}: {why}")
    return record
