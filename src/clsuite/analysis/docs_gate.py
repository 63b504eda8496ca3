"""The gate of ``make report DOCS=1`` (``clsuite report --docs``): which runs may reach docs/, by
the rules of docs/INTEGRITY.md, section 3 (an accepted code counts for every method but those its
entry's ``except_methods`` names); built from records (section 8), the codes their manifest names
instead. :func:`ungated` names each run that fails them and why.
"""

from __future__ import annotations

import json
import subprocess
import tarfile
import tempfile
from io import BytesIO
from pathlib import Path

from clsuite.run import identity as ident

ACCEPTED_FILE = "accepted_code.json"
CODE_PATHS = ("src/clsuite", "src/run.py", "src/hydra_plugins", "conf")


def code_at(rev: str, root: Path = ident.ROOT) -> str | None:
    """The content hash (``clsuite.run.identity.code_hash``) of the code at commit ``rev`` of the git
    checkout ``root``; None when git cannot give that commit's code."""
    try:
        tar = subprocess.run(
            ["git", "-C", str(root), "archive", "--format=tar", rev, *CODE_PATHS],
            capture_output=True, check=True, timeout=60,
        ).stdout  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return None
    with tempfile.TemporaryDirectory() as tmp, tarfile.open(fileobj=BytesIO(tar)) as tf:
        tf.extractall(tmp, filter="data")
        pkg = Path(tmp) / "src" / "clsuite"
        return ident.code_hash(pkg, Path(tmp) / "conf")


def committed_code(root: Path = ident.ROOT) -> str | None:
    """:func:`code_at` ``git HEAD`` of ``root``; outside a git checkout, the hash of the code this process runs."""
    return code_at("HEAD", root) or ident.code_identity()["hash"]


def accepted(docs: Path) -> dict[str, dict]:
    """``{code hash: entry}`` of ``docs/accepted_code.json`` (``{"accepted": [{"code_hash", "commit", "why"}]}``)."""
    try:
        data = json.loads((Path(docs) / ACCEPTED_FILE).read_text())
    except (OSError, ValueError):
        return {}
    items = data.get("accepted") if isinstance(data, dict) else None
    return {str(e["code_hash"]): e for e in items or [] if isinstance(e, dict) and e.get("code_hash")}


def ungated(experiments: dict, docs: Path, code: str | None, recorded: dict[str, str] | None = None) -> list[str]:
    """One line per run (or left-out file) that keeps the report out of docs/; [] when it may go in.
    ``recorded``: ``{code hash: commit}`` of a records manifest, the only codes that count then."""
    acc = accepted(docs) if recorded is None else {}
    ok = {code, *acc} - {None} if recorded is None else set(recorded)
    left_out, data, other_code = [], [], []
    for name, e in sorted(experiments.items()):
        left_out += [f"{name}/{r['job']}: left out ({r['reason']})" for r in e.status.get("rejected", [])]
        if e.empty:
            continue
        for _, run in e.runs.iterrows():
            if not run["real_data"]:
                data.append(f"{name}/{run['job']}: not on the real data set (synthetic, or a data file without md5)")
            excluded = run["method"] in (acc.get(run["code"]) or {}).get("except_methods", ())
            if run["code"] not in ok or excluded:
                other_code.append(
                    f"{name}/{run['job']}: made by code {run['code']} ({run['commit']}), "
                    + (
                        f"neither the committed code ({code}) nor accepted in docs/{ACCEPTED_FILE}"
                        if recorded is None
                        else f"not a code the records' manifest names ({', '.join(sorted(recorded))})"
                    )
                    + (f" (accepted except for method {run['method']})" if excluded else "")
                )
    return left_out + data + other_code  # the rarest first: a few edited files among many runs of old code
