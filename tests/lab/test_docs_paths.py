"""The architecture map of docs/METHODS.md names files and folders that exist (it named a
``sweep.py`` long after the sweep code became the ``sweep/`` package)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


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
    paths = [p for entry in mapped_paths((ROOT / "docs" / "METHODS.md").read_text()) for p in expand(entry)]
    assert "src/clsuite/sweep/" in paths and "src/clsuite/core/data/sources.py" in paths  # (the map is read)
    missing = [p for p in paths if not any(ROOT.glob(p.rstrip("/")))]
    assert not missing, f"docs/METHODS.md names what does not exist: {missing}"
