#!/usr/bin/env python
"""A corpus of real English prose, and chat messages drawn from it.

    python benchmarks/prose.py --build    # (re)write benchmarks/data/prose.txt
    python benchmarks/prose.py --check    # corpus size and zstd ratio of generated chats

Why: the benchmarks used to fill messages with a few dozen words repeated at random, which
zstd compresses about 5x; real chat text compresses about 3x, so filler flatters any
compression a saver does. The corpus is the prose of the Python standard library's
docstrings (PSF License): paragraphs of whole sentences, without code, doctests, tables,
lists or argument descriptions. ``--build`` extracts it once from the running interpreter's
standard library; the file is committed, so a run does not depend on the Python version.

``benchmarks/data/prose.txt`` holds one sentence per line and a blank line between
paragraphs; lines starting with ``#`` are comments.

Text is always drawn as *consecutive* sentences from a seeded random position, so a
conversation does not repeat itself until it has used the whole corpus.
"""

from __future__ import annotations

import argparse
import ast
import functools
import random
import re
import sys
import sysconfig
import zlib
from collections.abc import Iterator, Sequence
from pathlib import Path

CORPUS = Path(__file__).resolve().parent / "data" / "prose.txt"
MAX_BYTES = 400_000  # the build stops adding modules past this size

# -- build ----------------------------------------------------------------------------------

# Paths of the standard library whose docstrings are not wanted: tests, vendored code.
_SKIP_PARTS = {"test", "tests", "idle_test", "site-packages", "__pycache__", "lib2to3"}
# A line that opens code, a doctest, a list, a table, a heading or a directive.
_NOT_PROSE_START = re.compile(r"^(>>>|\.\.\.|[-*+|#:=]|\d+[.)]\s|[A-Za-z_]\w*\s*(--|:)\s)")
# Characters that prose here does not contain: code, markup, paths, identifiers.
_NOT_PROSE_CHAR = re.compile(r"[_=`<>{}\[\]\\/@$%^~|*#]|\(\)|::|->|\.\w+\(|http")
_ABBREVIATIONS = ("e.g.", "i.e.", "etc.", "vs.", "cf.", "Mr.", "Mrs.", "Dr.", "No.", "St.")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z\"'(])")


def _docstrings(path: Path) -> Iterator[str]:
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (SyntaxError, UnicodeDecodeError, ValueError):
        return
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            doc = ast.get_docstring(node, clean=True)
            if doc:
                yield doc


def split_sentences(paragraph: str) -> list[str]:
    """Split at ``. `` / ``! `` / ``? `` before a capital, but not after an abbreviation."""
    out: list[str] = []
    for piece in _SENTENCE_END.split(paragraph):
        if out and (out[-1].endswith(_ABBREVIATIONS) or re.search(r"\b[A-Z]\.$", out[-1])):
            out[-1] += " " + piece
        else:
            out.append(piece)
    return out


def prose_paragraphs(doc: str) -> Iterator[list[str]]:
    """The paragraphs of a docstring that read as prose, each as its sentences."""
    for block in re.split(r"\n\s*\n", doc):
        lines = block.split("\n")
        if any(line[:1].isspace() or _NOT_PROSE_START.match(line) for line in lines):
            continue  # indented (code, continuation of a list) or not prose
        text = " ".join(line.strip() for line in lines)
        if len(text) < 80 or not text.endswith(".") or _NOT_PROSE_CHAR.search(text):
            continue
        letters = sum(c.isalpha() for c in text)
        if letters < 0.75 * len(text) or sum(c.isupper() for c in text) > 0.08 * letters:
            continue  # numbers, tables, shouting (license text)
        sentences = split_sentences(text)
        if len(sentences) < 2 or not all(12 <= len(s) <= 400 for s in sentences):
            continue
        yield sentences


def build(out: Path = CORPUS) -> tuple[int, int, int]:
    """Write the corpus from this interpreter's standard library. Returns (modules,
    paragraphs, bytes)."""
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    by_module: dict[str, list[list[str]]] = {}
    seen: set[str] = set()
    for path in sorted(stdlib.rglob("*.py")):
        rel = path.relative_to(stdlib).as_posix()
        if _SKIP_PARTS.intersection(path.relative_to(stdlib).parts):
            continue
        for doc in _docstrings(path):
            for sentences in prose_paragraphs(doc):
                key = " ".join(sentences)
                if key not in seen:  # the same docstring is often copied between modules
                    seen.add(key)
                    by_module.setdefault(rel, []).append(sentences)
    # Whole modules in a stable pseudo-random order (crc32 of the path), so that a cap on the
    # size mixes topics instead of stopping at the letter "e"; a module's paragraphs stay in
    # order. (CPython 3.11's docstrings give about 220 KB, under the cap.)
    order = sorted(by_module, key=lambda rel: (zlib.crc32(rel.encode()), rel))
    chosen: list[str] = []
    size = 0
    for rel in order:
        if size >= MAX_BYTES:
            break
        chosen.append(rel)
        size += sum(len(s) + 1 for p in by_module[rel] for s in p) + len(by_module[rel])
    version = ".".join(map(str, sys.version_info[:3]))
    lines = [
        "# Prose paragraphs from the docstrings of the Python standard library",
        f"# (CPython {version}, PSF License), extracted by benchmarks/prose.py --build.",
        "# One sentence per line, a blank line between paragraphs.",
        "",
    ]
    paragraphs = 0
    for rel in sorted(chosen):
        for sentences in by_module[rel]:
            lines += [*sentences, ""]
            paragraphs += 1
    out.parent.mkdir(parents=True, exist_ok=True)
    data = "\n".join(lines).encode()
    out.write_bytes(data)
    return len(chosen), paragraphs, len(data)


# -- use ------------------------------------------------------------------------------------


@functools.cache
def sentences() -> tuple[str, ...]:
    """Every sentence of the corpus, in order."""
    text = CORPUS.read_text(encoding="utf-8")
    return tuple(line for line in text.splitlines() if line and not line.startswith("#"))


class Prose:
    """Consecutive sentences of the corpus from a seeded random position (wrapping around)."""

    def __init__(self, rng: random.Random) -> None:
        self._all = sentences()
        self._at = rng.randrange(len(self._all))

    def take(self, n: int) -> str:
        """The next ``n`` sentences, joined by spaces."""
        out = []
        for _ in range(n):
            out.append(self._all[self._at])
            self._at = (self._at + 1) % len(self._all)
        return " ".join(out)

    def chars(self, n_chars: int) -> str:
        """About ``n_chars`` characters: the next sentences up to that length, the last one
        cut at a word boundary (at least ``n_chars``, at most one word more)."""
        text = self.take(1)
        while len(text) < n_chars:
            text += " " + self.take(1)
        if len(text) > n_chars:
            cut = text.find(" ", n_chars)
            if cut != -1:
                text = text[:cut].rstrip(",;:") + ("" if text[cut - 1] in ".!?" else ".")
        return text


def text(rng: random.Random, n_chars: int) -> str:
    """About ``n_chars`` characters of consecutive sentences from a random position."""
    return Prose(rng).chars(n_chars)


class ChatText:
    """The text of one conversation: human turns of 1-3 sentences, assistant turns of 3-12,
    and summaries, all consecutive in the corpus from a seeded position, so nothing repeats
    within a conversation (until it has used the whole corpus)."""

    def __init__(self, seed: int | str) -> None:
        self._rng = random.Random(seed)
        self._prose = Prose(self._rng)

    def human(self) -> str:
        return self._prose.take(self._rng.randint(1, 3))

    def assistant(self) -> str:
        return self._prose.take(self._rng.randint(3, 12))

    def summary(self, n_sentences: int = 12) -> str:
        return self._prose.take(n_sentences)


# -- check ----------------------------------------------------------------------------------


def _ratio(data: Sequence[bytes], level: int = 3) -> float:
    import zstandard

    comp = zstandard.ZstdCompressor(level=level)
    return sum(len(d) for d in data) / sum(len(comp.compress(d)) for d in data)


def check(conversations: int = 20, window: int = 20) -> dict[str, float]:
    """zstd ratios of msgpacked (JsonPlusSerializer) chat messages from this corpus: each
    message alone, and windows of ``window`` messages (what a chat checkpoint stores)."""
    from langchain_core.messages import AIMessage, HumanMessage
    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

    serde = JsonPlusSerializer()
    singles: list[bytes] = []
    windows: list[bytes] = []
    for c in range(conversations):
        chat = ChatText(c)
        msgs = []
        for k in range(window // 2):
            msgs += [HumanMessage(content=chat.human(), id=f"h-{c}-{k}"),
                     AIMessage(content=chat.assistant(), id=f"a-{c}-{k}")]
        singles += [serde.dumps_typed(m)[1] for m in msgs]
        windows.append(serde.dumps_typed(msgs)[1])
    plain = "\n".join(sentences()).encode()
    return {
        "corpus_sentences": len(sentences()),
        "corpus_bytes": CORPUS.stat().st_size,
        "corpus_zstd3": _ratio([plain]),
        "message_bytes_mean": sum(map(len, singles)) / len(singles),
        "message_zstd3": _ratio(singles),
        "window_bytes_mean": sum(map(len, windows)) / len(windows),
        "window_zstd3": _ratio(windows),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--build", action="store_true", help=f"(re)write {CORPUS}")
    parser.add_argument("--check", action="store_true", help="report the zstd ratios")
    args = parser.parse_args(argv)
    if args.build:
        modules, paragraphs, size = build()
        print(f"wrote {CORPUS}: {size:,} bytes, {paragraphs:,} paragraphs from {modules} modules")
    if args.check or not args.build:
        r = check()
        print(f"corpus: {r['corpus_sentences']:,} sentences, {r['corpus_bytes']:,} bytes, "
              f"zstd-3 {r['corpus_zstd3']:.2f}x as one block")
        print(f"one message (msgpack, JsonPlusSerializer): {r['message_bytes_mean']:,.0f} bytes "
              f"on average, zstd-3 {r['message_zstd3']:.2f}x")
        print(f"20-message window: {r['window_bytes_mean']:,.0f} bytes on average, zstd-3 "
              f"{r['window_zstd3']:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
