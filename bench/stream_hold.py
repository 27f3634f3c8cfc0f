"""What holding back streamed text for redaction costs: delay to the first visible text.

The engine re-cuts a model's text deltas (`raven.safe_chunks.SafeChunks`) so that no
credential straddles two events; a word that is, or may grow into, a credential
waits for the delta that ends it. This replays real prose (every paragraph of
docs/*.md, as the start of an answer) as a model streams it: sub-word pieces of
1-4 characters with their leading space, one piece every `--interval-ms`. It
reports, in that virtual time, how much later the first visible text and every
character appear than they would unheld (the counterpart, which shows each delta
as it arrives), and the CPU cost per delta of the hold against redacting alone.

    uv run python bench/stream_hold.py [--interval-ms 20]

Aim: the added delay to the first visible text stays under 50 ms at 20 ms a token.
"""

from __future__ import annotations

import argparse
import random
import re
import statistics
import time
from pathlib import Path

from raven.redact import redact
from raven.safe_chunks import SafeChunks

DOCS = Path(__file__).parents[1] / "docs"


def answers() -> list[str]:
    paragraphs = []
    for page in sorted(DOCS.glob("*.md")):
        paragraphs += [p.strip() for p in page.read_text().split("\n\n") if len(p.strip()) > 40]
    return paragraphs


def pieces(text: str, rng: random.Random) -> list[str]:
    """Sub-word deltas as tokenizers cut them: a word's leading space stays with it."""
    out = []
    for word in re.findall(r"\s*\S+", text):
        while word:
            n = rng.randint(1, 4) if len(word) > 4 else len(word)
            out.append(word[:n])
            word = word[n:]
    return out


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--interval-ms", type=float, default=20.0)
    args = parser.parse_args()
    rng = random.Random(7)
    first_delays: list[float] = []
    char_delays: list[float] = []
    streams = [pieces(a, rng) for a in answers()]
    for deltas in streams:
        chunks = SafeChunks()
        shown_at: list[int] = []  # for each character, the index of the delta that showed it
        for k, delta in enumerate(deltas):
            shown_at += [k] * len(chunks.feed(delta))
        shown_at += [len(deltas)] * len(chunks.flush())  # the stream's end, one interval on
        arrived_at = [k for k, delta in enumerate(deltas) for _ in delta]
        first_visible = next(i for i, d in enumerate("".join(deltas)) if not d.isspace())
        first_delays.append(
            (shown_at[first_visible] - arrived_at[first_visible]) * args.interval_ms
        )
        char_delays += [
            (s - a) * args.interval_ms for s, a in zip(shown_at, arrived_at, strict=True)
        ]

    def cpu(hold: bool) -> float:
        started = time.perf_counter()
        count = 0
        for _ in range(3):
            for deltas in streams:
                chunks = SafeChunks()
                for delta in deltas:
                    redact(chunks.feed(delta) if hold else delta)
                    count += 1
        return (time.perf_counter() - started) / count * 1e6

    plain, held = cpu(False), cpu(True)
    print(
        f"{len(streams)} answers, {sum(map(len, streams))} deltas, {args.interval_ms:g} ms a delta"
    )
    print(
        f"added delay to the first visible text: median {statistics.median(first_delays):.0f} ms, "
        f"p99 {percentile(first_delays, 0.99):.0f} ms, max {max(first_delays):.0f} ms; "
        f"{sum(d > 0 for d in first_delays) / len(first_delays):.0%} of answers held at all"
    )
    print(
        f"added delay per character: median {statistics.median(char_delays):.0f} ms, "
        f"p99 {percentile(char_delays, 0.99):.0f} ms, max {max(char_delays):.0f} ms"
    )
    print(
        f"CPU per delta: {held:.1f} µs held and redacted, {plain:.1f} µs redacted alone "
        f"({held / plain:.2f}x)"
    )


if __name__ == "__main__":
    main()
