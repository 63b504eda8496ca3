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
