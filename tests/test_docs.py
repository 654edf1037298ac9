"""The repo stands alone and its docs hold together: no tracked file names a path outside the
repo, every relative link of README.md and docs/ resolves (file and heading), and the two
explanations stay short."""

from __future__ import annotations

import re
import subprocess
import unicodedata
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

# Spelled in pieces so that this file does not name them itself.
OUTSIDE = re.compile(
    "|".join([
        r"/" + r"work/[\w.-]",  # the machine's folder of checkouts and shared data
        r"(?<![\w.])" + r"\.\./" + r"(?:\.\./)*shared\b",  # a sibling of the checkout
    ])
)
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
FENCE = re.compile(r"^(```|~~~)")
HTML_ANCHOR = re.compile(r'<a id="([^"]+)"></a>')


def tracked_files() -> list[Path]:
    out = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True).stdout
    return [REPO / name for name in out.decode().split("\0") if name]


def markdown_docs() -> list[Path]:
    return [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]


def outside_paths(text: str) -> list[str]:
    return [m.group(0) for m in OUTSIDE.finditer(text)]


def test_the_checker_sees_a_path_outside_the_repo() -> None:
    assert outside_paths("data at /" + "work/shared/eval/x.json") == ["/" + "work/s"]
    assert outside_paths("see .." + "/shared/SPEC.md") == [".." + "/shared"]
    assert outside_paths("mount it at /data and /etc/paperclip/proxy.yaml; ../reference/config.md") == []


def test_no_tracked_file_names_a_path_outside_the_repo() -> None:
    found = []
    for path in tracked_files():
        if not path.is_file() or path.is_symlink():
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue  # a binary file (an image)
        for number, line in enumerate(text.splitlines(), 1):
            if outside_paths(line):
                found.append(f"{path.relative_to(REPO)}:{number}: {line.strip()[:120]}")
    assert found == [], "paths outside the repo:\n" + "\n".join(found)


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces as hyphens."""
    text = re.sub(r"[`*_]|\[([^\]]*)\]\([^)]*\)", lambda m: m.group(1) or "", heading.strip()).lower()
    kept = "".join(c for c in text if c in " -" or unicodedata.category(c)[0] in "LN")
    return kept.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    fenced = False
    for line in path.read_text().splitlines():
        if FENCE.match(line):
            fenced = not fenced
        if fenced or not line.startswith("#"):
            continue
        base = slug(line.lstrip("#"))
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out | set(HTML_ANCHOR.findall(path.read_text()))


def links(path: Path) -> list[str]:
    fenced = False
    found = []
    for line in path.read_text().splitlines():
        if FENCE.match(line):
            fenced = not fenced
        if not fenced:
            found += LINK.findall(re.sub(r"`[^`]*`", "", line))
    return found


def broken_links(path: Path, root: Path = REPO) -> list[str]:
    broken = []
    for target in links(path):
        if re.match(r"[a-z][a-z+.-]*:", target):
            continue  # https:, mailto:
        file, _, anchor = target.partition("#")
        dest = (path.parent / file).resolve() if file else path
        outside = not dest.exists() or root not in dest.parents
        if outside or (anchor and dest.suffix == ".md" and anchor not in anchors(dest)):
            broken.append(target)
    return broken


def test_the_link_checker_sees_a_broken_file_and_a_broken_heading(tmp_path: Path) -> None:
    assert slug(" The `memory` block: what, and why (2026)") == "the-memory-block-what-and-why-2026"
    (tmp_path / "a.md").write_text('# Top\n\n## Same\n\n## Same\n\n- <a id="here"></a>x\n')
    doc = tmp_path / "b.md"
    doc.write_text(
        "[ok](a.md#same-1) [ok](a.md#here) [ok](a.md) [ok](https://example.com/x) `[code](nowhere.md)`\n"
        "[gone](c.md) [no heading](a.md#other) [out](../x.md)\n```\n[fenced](nowhere.md)\n```\n"
    )
    (tmp_path.parent / "x.md").touch()
    assert broken_links(doc, tmp_path) == ["c.md", "a.md#other", "../x.md"]


@pytest.mark.parametrize("path", markdown_docs(), ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_resolves(path: Path) -> None:
    assert broken_links(path) == []


@pytest.mark.parametrize("name", ["recall.md", "compression.md"])
def test_the_explanations_stay_short(name: str) -> None:
    lines = (REPO / "docs" / name).read_text().splitlines()
    assert 0 < len(lines) <= 300, f"docs/{name} has {len(lines)} lines: it states the rules in force, in 300 lines"


def test_readme_is_a_front_door() -> None:
    lines = (REPO / "README.md").read_text().splitlines()
    assert len(lines) < 200
