"""Real English prose for the values of tests that compress: the benchmarks' corpus
(``benchmarks/data/prose.txt``, docstring paragraphs of the standard library), which
compresses about 3x as chat text does, where filler would flatter compression. The tests
took the README's text before; it became a short guide, too short for their slices, and a
test's data should not move with the docs."""

from __future__ import annotations

from pathlib import Path

CORPUS = Path(__file__).resolve().parents[1] / "benchmarks" / "data" / "prose.txt"

# the corpus without its comment lines: one sentence per line, a blank line between paragraphs
PROSE = "\n".join(
    line for line in CORPUS.read_text().splitlines() if not line.startswith("#")
).strip()
