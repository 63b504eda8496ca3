"""The docs' paths and links lead somewhere: docs/ keeps at most 8 top-level files, every
``docs/<NAME>.md`` a file, a doc, the code or a config names exists (with the section it quotes),
every relative link of the docs resolves (its ``#anchor`` too), and the architecture map of
docs/DEVELOPING.md names files and folders that exist (it named a ``sweep.py`` long after the sweep
code became the ``sweep/`` package)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MAX_TOP_LEVEL_DOCS = 8  # what a user needs, what a developer needs, methods, protocol, integrity, the generated two
DOC_PATH = re.compile(r"docs/(?:notes/)?\w+\.md")
QUOTED_SECTION = re.compile(r"(docs/(?:notes/)?\w+\.md),? \"([^\"]+)\"")
LINK = re.compile(r"\]\(([^)\s]+)\)")


def mapped_paths(text: str) -> list[str]:
    """The paths of the first code block: each entry under the folders above it at smaller indents."""
    block = text.split("```", 2)[1]
    out, folders = [], []  # folders: (indent, path) of the enclosing folders, outermost first
    for line in block.splitlines():
        m = re.match(r"^(\s*)(\S+)", line)
        if not m or not re.search(r"[./]", m.group(2)) or m.group(2).startswith(("(", "`")):
            continue
        indent, name = len(m.group(1)), m.group(2)
        while folders and folders[-1][0] >= indent:
            folders.pop()
        path = (folders[-1][1] if folders else "") + name
        out.append(path)
        if name.endswith("/"):
            folders.append((indent, path))
    return out


def expand(path: str) -> list[str]:
    """``methods/{a,b}.py`` -> the two paths; ``*`` and ``<...>`` parts stay globs."""
    if m := re.search(r"\{([^}]*)\}", path):
        return [p for v in m.group(1).split(",") for p in expand(path[: m.start()] + v + path[m.end() :])]
    return [re.sub(r"<[^>]*>", "*", path).rstrip(",")]


def test_every_path_of_the_architecture_map_exists():
    paths = [p for entry in mapped_paths((ROOT / "docs" / "DEVELOPING.md").read_text()) for p in expand(entry)]
    assert "src/clsuite/sweep/" in paths and "src/clsuite/core/data/sources.py" in paths  # (the map is read)
    missing = [p for p in paths if not any(ROOT.glob(p.rstrip("/")))]
    assert not missing, f"docs/DEVELOPING.md names what does not exist: {missing}"


def test_docs_has_at_most_eight_top_level_files():
    top = sorted(p.name for p in (ROOT / "docs").glob("*.md"))
    assert len(top) <= MAX_TOP_LEVEL_DOCS, f"docs/ has {len(top)} top-level docs: {top}"


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces as ``-``."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def headings(text: str, bold: bool = False) -> list[str]:
    """The Markdown headings of ``text`` (outside fenced code), without their ``#`` and backticks;
    ``bold``: with the bold lead-ins of its paragraphs and items (``**Resume.**``), which a quote may name."""
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    found = re.findall(r"^#+ +(.+)$", text, re.M) + (re.findall(r"^(?:- )?\*\*([^*]+)\*\*", text, re.M) if bold else [])
    return [h.replace("`", "").strip() for h in found]


def naming_files() -> list[Path]:
    """README.md, the docs, the code, the configs, the sweeps, the scripts and the Makefile."""
    files = [
        ROOT / "README.md",
        ROOT / "Makefile",
        *(ROOT / "docs").glob("*.md"),
        *(ROOT / "docs" / "notes").glob("*.md"),
    ]
    for folder in ("src", "conf", "sweeps", "scripts"):
        files += [p for p in (ROOT / folder).rglob("*") if p.is_file() and p.suffix in {".py", ".yaml", ".md", ".sh"}]
    return sorted(files)


def stale_names(texts: dict[str, str], root: Path) -> list[str]:
    """``file: problem`` for every ``docs/<NAME>.md`` of ``texts`` that is not under ``root``, every
    ``docs/<NAME>.md, "<section>"`` whose doc has no heading that starts so, and every relative link of a
    Markdown file (named relative to ``root``) whose target or ``#anchor`` does not exist."""
    bad = []
    for name, text in texts.items():
        flat = " ".join(text.split())
        bad += [f"{name}: {p}" for p in sorted(set(DOC_PATH.findall(text))) if not (root / p).is_file()]
        for doc, section in QUOTED_SECTION.findall(flat):
            section = section.replace("`", "")
            if (root / doc).is_file() and not any(
                h.startswith(section) for h in headings((root / doc).read_text(), bold=True)
            ):
                bad += [f'{name}: {doc}, "{section}" (no such heading)']
        if not name.endswith(".md"):
            continue
        for target in LINK.findall(re.sub(r"```.*?```|`[^`\n]*`", "", text, flags=re.S)):
            if re.match(r"[a-z]+:", target):  # (https:, mailto:)
                continue
            path, _, anchor = target.partition("#")
            where = (root / name).parent / path if path else root / name
            if not where.exists():
                bad += [f"{name}: link {target}"]
            elif anchor and where.suffix == ".md" and anchor not in {slug(h) for h in headings(where.read_text())}:
                bad += [f"{name}: link {target} (no such heading)"]
    return bad


def test_every_doc_path_and_link_exists():
    texts = {p.relative_to(ROOT).as_posix(): p.read_text() for p in naming_files()}
    assert "docs/GUIDE.md" in texts and "conf/config.yaml" in texts and any(n.startswith("src/clsuite/") for n in texts)
    bad = stale_names(texts, ROOT)
    assert not bad, "docs paths, sections or links that lead nowhere:\n" + "\n".join(bad)


def test_the_check_finds_a_stale_name_a_missing_section_and_a_broken_anchor(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "GUIDE.md").write_text("# Guide\n\n## Runs and sweeps\n\n```\n## not a heading\n```\n")
    texts = {
        "src/a.py": '"""See docs/GUIDE.md, "Runs and sweeps"; docs/RUNS.md, and docs/GUIDE.md, "not a heading"."""',
        "docs/INTEGRITY.md": "[ok](GUIDE.md#runs-and-sweeps) [gone](RUNS.md) [no anchor](GUIDE.md#identity) `[x](y.md)`",
    }
    assert stale_names(texts, tmp_path) == [
        "src/a.py: docs/RUNS.md",
        'src/a.py: docs/GUIDE.md, "not a heading" (no such heading)',
        "docs/INTEGRITY.md: link RUNS.md",
        "docs/INTEGRITY.md: link GUIDE.md#identity (no such heading)",
    ]
    assert slug("8. Readings") == "8-readings" and slug("Weights & Biases") == "weights--biases"


# Names that mean something only to the people who made them: a tracker's experiment prefixes, its
# issue numbers, "this project's machines", a session's stop. docs/history/ keeps earlier reports as
# they were and is not read.
PRIVATE = re.compile(r"i32_|i33_|i44_|issue [0-9]|this project.s machines|not on these machines|at the stop of")
TEXT_SUFFIXES = {".md", ".json", ".yaml", ".yml", ".csv", ".txt", ".py", ".sh"}


def private_names(root: Path) -> list[str]:
    """``path:line: text`` of every match of :data:`PRIVATE` in README.md, the Makefile, docs/ (less
    docs/history/), conf/ and sweeps/, and every file there whose name matches (a figure, an archive)."""
    paths = [root / "README.md", root / "Makefile"]
    for folder in ("docs", "conf", "sweeps"):
        paths += [
            p
            for p in sorted((root / folder).rglob("*"))
            if p.is_file() and "history" not in p.relative_to(root).parts[1:2]
        ]
    bad = []
    for p in paths:
        rel = p.relative_to(root).as_posix()
        if PRIVATE.search(p.name):
            bad.append(f"{rel}: its name")
        if p.suffix in TEXT_SUFFIXES or p.name == "Makefile":
            bad += [f"{rel}:{i}: {line.strip()[:120]}" for i, line in enumerate(p.read_text().splitlines(), 1)
                    if PRIVATE.search(line)]  # fmt: skip
    return bad


def test_docs_name_nothing_private_to_the_tracker_or_a_session():
    bad = private_names(ROOT)
    assert not bad, "names that mean nothing outside the project (say what they hold):\n" + "\n".join(bad)


def test_the_private_name_check_reads_names_and_lines_but_not_history(tmp_path):
    (tmp_path / "docs" / "history").mkdir(parents=True)
    (tmp_path / "docs" / "figures").mkdir()
    (tmp_path / "conf").mkdir()
    (tmp_path / "README.md").write_text("fine\nas in issue 33\n")
    (tmp_path / "Makefile").write_text("all:\n")
    (tmp_path / "docs" / "history" / "OLD.md").write_text("i44_cifar10_jpeg\n")
    (tmp_path / "docs" / "figures" / "i44_x.png").write_bytes(b"\x89PNG")
    (tmp_path / "docs" / "GUIDE.md").write_text("on this project's machines\n")
    assert private_names(tmp_path) == [
        "README.md:2: as in issue 33",
        "docs/GUIDE.md:1: on this project's machines",
        "docs/figures/i44_x.png: its name",
    ]


# Paths of the changelog and the README: a reader follows them from the release notes too.
NAMED_PATH = re.compile(r"docs/[\w./-]+\.(?:md|json|tar\.gz|png)")


def missing_paths(texts: dict[str, str], root: Path) -> list[str]:
    """``file: path`` for every ``docs/...`` file path of ``texts`` (Markdown, JSON, archives, figures; a
    ``<placeholder>`` path left out) that does not exist under ``root``."""
    return [f"{name}: {p}" for name, text in texts.items() for p in sorted(set(NAMED_PATH.findall(text)))
            if not (root / p).exists()]  # fmt: skip


def test_every_docs_path_of_the_changelog_and_readme_exists():
    texts = {n: (ROOT / n).read_text() for n in ("CHANGELOG.md", "README.md")}
    assert "docs/notes/PERFORMANCE.md" in texts["CHANGELOG.md"]  # (the changelog is read)
    bad = missing_paths(texts, ROOT) + stale_names({"CHANGELOG.md": texts["CHANGELOG.md"]}, ROOT)
    assert not bad, "paths the changelog or README name that do not exist (point to today's home):\n" + "\n".join(bad)


def test_the_named_path_check_finds_a_moved_doc_and_a_renamed_record(tmp_path):
    (tmp_path / "docs" / "notes").mkdir(parents=True)
    (tmp_path / "docs" / "notes" / "GPU.md").write_text("# GPU\n")
    text = "docs/GPU.md and docs/notes/GPU.md; docs/records/old_name.tar.gz; docs/records/<experiment>.tar.gz"
    assert missing_paths({"CHANGELOG.md": text}, tmp_path) == [
        "CHANGELOG.md: docs/GPU.md",
        "CHANGELOG.md: docs/records/old_name.tar.gz",
    ]
