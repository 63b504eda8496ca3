"""One current set of numbers: the docs state no figure that the report does not.

The report, docs/REPRODUCTION.md, is generated from the runs (``make report DOCS=1``); every other
doc points to it instead of copying its numbers, so regenerating it cannot leave an old figure
behind. Checked: README.md, docs/*.md and the Makefile's comments. A *figure* is a number with a
decimal point in prose (fenced code, inline code, link targets and HTML comments are left out, and
so are versions such as 2.13.0); it must appear in the report or be a setting of the suite (a
value in conf/ or sweeps/). Whole numbers (counts of seeds, methods, tasks) are too common to be
checked this way.

Not checked, each for its reason (:data:`RECORDS`, :data:`GENERATED`): the report itself, the
generated key reference, measured history (docs/history/), and the records of measurements the
report does not make (speed, GPU times, checkpoint cost), each of which names the machine and the
code it measured; of docs/notes/PARITY.md only its history (:data:`HISTORY_FROM`: the current table is
the report's).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
REPORT = ROOT / "docs" / "REPRODUCTION.md"
GENERATED = {
    "REPRODUCTION.md": "the report itself",
    "CONFIG.md": "generated from clsuite.config.schema (ranges, defaults)",
}
RECORDS = {  # measurements the report does not make: each names its machine and code
    "notes/PERFORMANCE.md": "speed (make bench, Table II end to end)",
    "notes/PARITY.md": "the three fixes of GSS, iCaRL, HAL, measured beside Mammoth (its history part only)",
    "notes/GPU.md": "GPU tests and CIFAR times",
    "notes/CHECKPOINTS.md": "checkpoint size and write time",
    "notes/NUMERICS.md": "the CPU kernels' cost and noise, and Table II across machines",
}
HISTORY_FROM = {"notes/PARITY.md": "\n## History"}  # a record whose part before this heading is checked as any doc
FIGURE = re.compile(r"(?<![\w.])[-−+]?\d+\.\d+(?![\w]|\.\d)")


def prose(text: str) -> str:
    """``text`` without fenced code, inline code, HTML comments and link targets (lines kept)."""
    keep_lines = lambda m: "\n" * m.group(0).count("\n")  # noqa: E731
    for pattern in (r"```.*?```", r"<!--.*?-->", r"`[^`]*`"):  # (inline code may span lines)
        text = re.sub(pattern, keep_lines, text, flags=re.S)
    return re.sub(r"\]\([^)\s]*\)", "]", text)


def figures(text: str) -> list[tuple[int, str]]:
    """(line number, figure) of every figure of ``text``'s prose; signs as ASCII, ``+`` dropped."""
    out = []
    for i, line in enumerate(prose(text).splitlines(), 1):
        out += [(i, m.group(0).replace("−", "-").lstrip("+")) for m in FIGURE.finditer(line)]
    return out


def makefile_comments() -> str:
    """The Makefile's comments and ``##`` help texts, one per line (other lines blank)."""
    lines = (ROOT / "Makefile").read_text().splitlines()
    return "\n".join(line[line.index("#") :] if "#" in line else "" for line in lines)


def settings() -> set[str]:
    """Every number that is a value in conf/ or sweeps/ (``0.1``, a swept ``0.1,0.3``): a setting, not a result."""
    found: set[str] = set()

    def walk(node):
        if isinstance(node, dict):
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)
        elif isinstance(node, float | int | str) and not isinstance(node, bool):
            found.update(FIGURE.findall(str(node)))

    for path in [*ROOT.glob("conf/**/*.yaml"), *ROOT.glob("sweeps/*.yaml")]:
        walk(yaml.safe_load(path.read_text()))
    return {f.lstrip("+") for f in found}


def doc_files() -> list[Path]:
    """The docs: docs/*.md and the dated measurements of docs/notes/ (not the measured history)."""
    return sorted([*(ROOT / "docs").glob("*.md"), *(ROOT / "docs" / "notes").glob("*.md")])


def checked_docs() -> dict[str, str]:
    docs = {"README.md": (ROOT / "README.md").read_text(), "Makefile": makefile_comments()}
    for path in doc_files():
        name = path.relative_to(ROOT / "docs").as_posix()  # (docs/notes/: dated measurements)
        if name in HISTORY_FROM:  # the current part (the report has the numbers), not the history
            docs[f"docs/{name}"] = path.read_text().split(HISTORY_FROM[name])[0]
        elif name not in GENERATED and name not in RECORDS:
            docs[f"docs/{name}"] = path.read_text()
    return docs


def unsupported(docs: dict[str, str], report: str, allowed: set[str]) -> list[str]:
    """``doc:line: figure`` for every figure of ``docs`` that is neither in ``report`` nor in ``allowed``."""
    known = {f for _, f in figures(report)} | {f for f in FIGURE.findall(report)} | allowed
    known = {f.replace("−", "-").lstrip("+") for f in known}
    return [f"{name}:{line}: {fig}" for name, text in docs.items() for line, fig in figures(text) if fig not in known]


def test_no_doc_states_a_figure_the_report_does_not():
    bad = unsupported(checked_docs(), REPORT.read_text(), settings())
    assert not bad, "figures not in docs/REPRODUCTION.md (point to the report instead of copying):\n" + "\n".join(bad)


def test_the_check_finds_a_copied_figure_and_ignores_code_and_versions():
    report = "| MIR | 90.4 ± 1.9 | -2.6 |"
    doc = (
        "MIR reaches 90.4 (see `tau=0.37`), BWT −2.6, mean gap 4.75 points\n"
        "```\nmake table2  # 12.34\n```\n"
        "torch 2.13.0, [link](a/1.5.md) <!-- 6.66 -->, tau = 0.5\n"
    )
    assert unsupported({"x.md": doc}, report, {"0.5"}) == ["x.md:1: 4.75"]


def test_records_name_their_machine_and_code_and_history_keeps_the_old_results_page():
    for name, what in RECORDS.items():
        text = (ROOT / "docs" / name).read_text()
        assert re.search(r"commit|measured|Measured", text), f"docs/{name} ({what}) must say what it measured"
    assert not (ROOT / "docs" / "RESULTS.md").exists()  # measured history now: docs/history/<date>-<commit>/
    (old,) = ROOT.glob("docs/history/*/RESULTS.md")
    assert "measured history" in old.read_text()
    for name, text in checked_docs().items():
        assert "RESULTS.md" not in text or name == "docs/README.md", f"{name} links the old results page"


@pytest.mark.parametrize("path", ["README.md", "docs/METHODS.md"])
def test_the_default_reading_points_to_the_reports_measurement(path):
    section = "Which reading is closer to the paper's Table II"
    assert section in " ".join((ROOT / path).read_text().split())
    assert f"### {section}" in REPORT.read_text()  # (the report's own heading)


# Words of the tracker and of the work's bookkeeping, not of the suite: a doc states facts.
TRACKER = re.compile(
    r"\bissues? #?\d|\bissue-\d|moved from the readme|\bsessions?\b|\bengineers?\b|project's (?:cpu )?machine\b", re.I
)


def user_docs() -> dict[str, str]:
    """README.md, sweeps/README.md and every doc of docs/ (generated ones too; not the measured history)."""
    paths = [ROOT / "README.md", ROOT / "sweeps" / "README.md", *doc_files()]
    return {p.relative_to(ROOT).as_posix(): p.read_text() for p in paths}


def test_no_doc_carries_tracker_words():
    bad = [f"{name}:{i}: {m.group(0)}" for name, text in user_docs().items()
           for i, line in enumerate(text.splitlines(), 1) for m in TRACKER.finditer(line)]  # fmt: skip
    assert not bad, "tracker words in the docs (say the fact instead):\n" + "\n".join(bad)
    assert TRACKER.findall("Moved from the README (issue 22); on this session's machine, by five engineers") == [
        "Moved from the README", "issue 2", "session", "engineers"
    ]  # fmt: skip


def test_every_record_names_the_cpu_or_gpu_that_made_it_and_gpu_times_their_torch():
    """The machines change CPU kind over time: a record names which one measured (not "the project's
    machine"); the H200 times were made with torch 2.11, not the 2.13 the package requires, and a full
    run's time there is projected from the time per batch: every doc that quotes them says so."""
    for name in RECORDS:
        text = (ROOT / "docs" / name).read_text()
        assert re.search(r"AMD EPYC|Intel Xeon|H200", text), (
            f"docs/{name} does not name the CPU (or GPU) it measured on"
        )
    for name, text in user_docs().items():
        if "H200" in text and name != "docs/REPRODUCTION.md":
            flat = " ".join(text.split())
            assert "torch 2.11" in flat and "projected" in flat, f"{name} quotes the H200 times without their torch"
    assert (
        "No GPU was" not in (ROOT / "docs" / "notes" / "PERFORMANCE.md").read_text()
    )  # docs/notes/GPU.md has GPU times
