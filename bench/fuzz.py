"""The long fuzz run (not in CI): mutate every sample of every definition, N times, and
feed each mutation to the parser. Any exception or an input slower than --slow seconds is
a failure. Prints the count and the outcome for README's reliability section.

    python bench/fuzz.py --count 1000000 --seed 1
"""

from __future__ import annotations

import argparse
import random
import re
import sys
import time
import traceback

from specscope.logs.definitions import load_definitions
from specscope.logs.grammar import Grammar
from specscope.logs.parser import parse_text

NUMBERS = ["nan", "inf", "-1", "99999999999999999999999", "1e308", "-0.0", "\x00", "", "0x1F"]


def mutate(rng: random.Random, text: str) -> str:
    choice = rng.randrange(9)
    if choice == 0:
        return text[: rng.randrange(len(text) + 1)]
    if choice == 1:
        i = rng.randrange(len(text) + 1)
        return (
            text[:i]
            + chr(rng.randrange(0x110000 - 0x800) if rng.random() < 0.3 else rng.randrange(32, 127))
            + text[i + 1 :]
        )
    if choice == 2:
        return re.sub(r"\d+(\.\d+)?", lambda _: rng.choice(NUMBERS), text)
    if choice == 3:
        return text.replace(", ", ", " + "0.000, " * rng.choice([10, 1000, 10_000]), 1)
    if choice == 4 and rng.random() < 0.02:
        return text + "x" * 1_000_000
    if choice == 5:
        cut = rng.randrange(len(text) + 1)
        return text[:cut] + "\n" + text[cut:]
    if choice == 6:
        return text + text
    if choice == 7:
        return text.encode("utf-8").decode("latin-1")
    data = bytearray(text.encode("utf-8", errors="replace"))
    for _ in range(rng.randrange(1, 8)):
        if data:
            data[rng.randrange(len(data))] = rng.randrange(256)
    return data.decode("utf-8", errors="replace")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--slow", type=float, default=2.0)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    grammar = Grammar(load_definitions())
    samples = [s.text for d in grammar.definitions for s in d.samples]
    failures = slow = 0
    slowest = 0.0
    started = time.perf_counter()
    for n in range(1, args.count + 1):
        text = mutate(rng, rng.choice(samples))
        t0 = time.perf_counter()
        try:
            parse_text(text, grammar)
        except Exception:  # the point is to find any
            failures += 1
            if failures <= 5:
                print(f"input {n}: {text[:200]!r}", file=sys.stderr)
                traceback.print_exc()
        spent = time.perf_counter() - t0
        slowest = max(slowest, spent)
        if spent > args.slow:
            slow += 1
        if n % 100_000 == 0:
            print(
                f"{n:,} inputs, {failures} failures, {slow} slow, "
                f"slowest {slowest:.2f} s, {time.perf_counter() - started:.0f} s",
                flush=True,
            )
    print(
        f"fuzz: {args.count:,} inputs (seed {args.seed}), {failures} exceptions, {slow} slower "
        f"than {args.slow} s, slowest {slowest:.2f} s, {time.perf_counter() - started:.0f} s"
    )
    return 1 if failures or slow else 0


if __name__ == "__main__":
    sys.exit(main())
