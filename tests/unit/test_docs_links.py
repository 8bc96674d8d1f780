"""Every relative link of the README and of the docs leads somewhere: to a file of the
repository and, for a ``#anchor``, to a heading of that file, by GitHub's anchor rules."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted(
    [
        ROOT / "README.md",
        ROOT / "CHANGELOG.md",
        ROOT / "benchmarks" / "README.md",
        *(ROOT / "docs").glob("*.md"),
    ]
)
_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
_CODE_SPAN = re.compile(r"`[^`]*`")


def prose_lines(text: str) -> list[str]:
    """The lines of a markdown text outside fenced code blocks."""
    lines, fenced = [], False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif not fenced:
            lines.append(line)
    return lines


def github_slug(heading: str) -> str:
    """The anchor GitHub gives a heading: its text lowercased, markup and punctuation dropped
    (letters, digits, spaces, ``-`` and ``_`` stay), each space a ``-``."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link counts by its text
    return re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """Every heading anchor of a page; a repeated heading gets ``-1``, ``-2`` ... as on GitHub."""
    seen: dict[str, int] = {}
    found = set()
    for line in prose_lines(page.read_text()):
        match = re.match(r"#{1,6} (.+)", line)
        if match:
            slug = github_slug(match.group(1))
            found.add(f"{slug}-{seen[slug]}" if slug in seen else slug)
            seen[slug] = seen.get(slug, 0) + 1
    return found


def relative_links(page: Path) -> list[str]:
    links = []
    for line in prose_lines(page.read_text()):
        links += _LINK.findall(_CODE_SPAN.sub("", line))
    return [link for link in links if not re.match(r"[a-z]+:", link)]


def broken_links(page: Path) -> list[str]:
    broken = []
    for link in relative_links(page):
        path, _, anchor = link.partition("#")
        target = (page.parent / path).resolve() if path else page
        if not target.exists():
            broken.append(f"{link}: no such file")
        elif anchor and anchor not in anchors(target):
            broken.append(f"{link}: no heading #{anchor} in {target.name}")
    return broken


def test_github_slugs_of_the_docs_headings() -> None:
    assert github_slug("Eviction (maxmemory-policy)") == "eviction-maxmemory-policy"
    assert github_slug("Memory: compression and bounded history") == (
        "memory-compression-and-bounded-history"
    )
    assert github_slug("Expiry (TTL)") == "expiry-ttl"
    assert github_slug("Global queries: `list(None, filter, limit=10)` over many threads") == (
        "global-queries-listnone-filter-limit10-over-many-threads"
    )
    assert github_slug("See [the cluster](docs/cluster.md)") == "see-the-cluster"


def test_a_broken_link_or_anchor_is_reported(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("# Top\n\n## Same\n\n## Same\n")
    page = tmp_path / "b.md"
    page.write_text(
        "[ok](a.md#top) [dup](a.md#same-1) [self](#here) [web](https://example.com/x.md)\n"
        "`[in code](nowhere.md)`\n```\n[fenced](nowhere.md)\n```\n"
        "[gone](missing.md) [bad anchor](a.md#same-2)\n\n# Here\n"
    )
    assert broken_links(page) == [
        "missing.md: no such file",
        "a.md#same-2: no heading #same-2 in a.md",
    ]


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(ROOT)))
def test_every_relative_link_resolves(page: Path) -> None:
    assert broken_links(page) == []


def test_the_docs_index_links_every_page_of_docs() -> None:
    index = ROOT / "docs" / "README.md"
    linked = {link.partition("#")[0] for link in relative_links(index)}
    pages = {page.name for page in (ROOT / "docs").glob("*.md")} - {"README.md"}
    assert pages - linked == set()
