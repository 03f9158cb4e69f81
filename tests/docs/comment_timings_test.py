#!/usr/bin/python3
"""Code comments say what and why, never when: no dates or timings in them.

Reads the comments of every C++ source under service/ and client/ (// and
/* */ comments; string and character literals are skipped, and so is text
quoted with "..." inside a comment: an example of a program's output) and
fails, naming file:line, where a comment holds

  - a date: 2026-12-03, "on 3 December 2026", "on Dec 3";
  - a duration measured: "721 ms", "0.17 ns", "7 s)", "took 10 s",
    "takes minutes" is fine but "takes 7 s" is not; a duration that is a
    setting ("every 100 ms", "capped at 5 s", "up to ~10 s", "a timeout of
    30 s") is fine;
  - a speed-up or rate: "2x faster", "1.36x as fast", "twice as fast", "a
    third slower", "GFLOP/s", "tokens/s", "ns per entry".

Measurements belong in docs/performance.md (the latest) and
docs/performance-history.md (dated runs); a comment keeps the one-line
reason. Usage: comment_timings_test.py --repo DIR
"""
import argparse
import os
import re
import sys

ROOTS = ("service", "client")
SUFFIXES = (".cc", ".h", ".cpp", ".hpp")

MONTH = (r"(?:Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|June?|July?|"
         r"Aug(?:ust)?|Sep(?:t(?:ember)?)?|Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?)")
NUMBER = r"~?\d[\d.,]*"
UNIT = r"(?:ns|µs|us|ms|s|sec|secs|seconds?|min|mins|minutes?|h|hours?)"
# Words after which a duration is a setting, not a measurement.
SETTING = re.compile(
    r"(?:every|after|at|within|up to|over|under|than|timeout(?: of)?|deadline(?: of)?|"
    r"interval(?: of)?|period(?: of)?|limit(?: of)?|default(?: of)?|wait|waits|sleep|"
    r"sleeps|poll|polls|bucket(?: of)?|buckets|cap|caps|capped at)\s*$",
    re.IGNORECASE)

CHECKS = [
    ("a date", re.compile(r"\b20\d\d-(?:0[1-9]|1[0-2])(?:-\d\d)?\b")),
    ("a date", re.compile(rf"\bon (?:\d{{1,2}} {MONTH}\b|{MONTH} \d{{1,2}}\b)")),
    ("a date", re.compile(rf"\b\d{{1,2}} {MONTH},? 20\d\d\b|\b{MONTH} \d{{1,2}},? 20\d\d\b")),
    ("a speed-up", re.compile(
        r"(?:\b\d[\d.]*\s?[x×]|\b\d[\d.]*\s?%|\b\d+ times|\btwice|\bhalf|\ba third|\ba quarter)"
        r"\s+(?:as\s+)?(?:faster|slower|fast|slow)\b", re.IGNORECASE)),
    ("a rate", re.compile(r"GFLOP|\b(?:tokens|prompts|requests|rows)/s\b|\bns per\b",
                          re.IGNORECASE)),
    ("a measured duration", re.compile(
        rf"\b(?:took|takes|take|taking|spent|spends|spend|costs?|ran in|runs in|lasted)\s+"
        rf"(?:about |over |under |only |almost |nearly |just )?{NUMBER}\s?{UNIT}\b",
        re.IGNORECASE)),
]
# A duration with a sub-second unit, or closing a parenthesis: a timing
# unless a setting word precedes it.
DURATION = re.compile(rf"(?<![\w.])({NUMBER})\s?(?:ns|µs|us|ms)\b|(?<![\w.])({NUMBER})\s?s\)")


def comments(text):
    """Yields (line, comment text) for each comment line of C++ source."""
    i, n, line = 0, len(text), 1
    while i < n:
        c = text[i]
        if c == "\n":
            line += 1
            i += 1
        elif text.startswith("//", i):
            end = text.find("\n", i)
            end = n if end < 0 else end
            yield line, text[i + 2:end]
            i = end
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end < 0 else end
            for k, part in enumerate(text[i + 2:end].split("\n")):
                yield line + k, part
            line += text.count("\n", i, end)
            i = end + 2
        elif c == "R" and text.startswith('R"', i) and (i == 0 or not text[i - 1].isalnum()):
            open_paren = text.find("(", i + 2)
            delim = text[i + 2:open_paren]
            end = text.find(")" + delim + '"', open_paren)
            end = n if end < 0 else end + len(delim) + 2
            line += text.count("\n", i, end)
            i = end
        elif c == '"' or (c == "'" and not (i > 0 and text[i - 1].isalnum())):
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            i = j + 1
        else:
            i += 1


def strip_quotes(block):
    """Blanks text quoted with "..." (it may span lines) in comment lines."""
    out, quoted = [], False
    for line, text in block:
        chars = []
        for ch in text:
            if ch == '"':
                quoted = not quoted
                chars.append(" ")
            else:
                chars.append(" " if quoted else ch)
        out.append((line, "".join(chars)))
    return out


def blocks(text):
    """Runs of comment lines on consecutive lines, quotes stripped."""
    block = []
    for line, comment in comments(text):
        if block and line != block[-1][0] + 1:
            yield strip_quotes(block)
            block = []
        block.append((line, comment))
    if block:
        yield strip_quotes(block)


def findings(path, text):
    for block in blocks(text):
        previous = ""
        for line, comment in block:
            for what, pattern in CHECKS:
                m = pattern.search(comment)
                if m:
                    yield f"{path}:{line}: {what} in a comment: {m.group(0).strip()!r}"
            for m in DURATION.finditer(comment):
                # The words before it, from the previous line too ("every\n// 100 ms").
                before = (previous + " " + comment[:m.start()]).rstrip()
                if not SETTING.search(before + " "):
                    yield f"{path}:{line}: a timing in a comment: {m.group(0).strip()!r}"
            previous = comment


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--repo", default=os.path.join(os.path.dirname(__file__), "..", ".."))
    args = parser.parse_args()
    problems, files = [], 0
    for root in ROOTS:
        for folder, _, names in os.walk(os.path.join(args.repo, root)):
            for name in sorted(names):
                if not name.endswith(SUFFIXES):
                    continue
                path = os.path.join(folder, name)
                with open(path, encoding="utf-8", errors="replace") as f:
                    text = f.read()
                files += 1
                problems += findings(os.path.relpath(path, args.repo), text)
    for p in problems:
        print(p)
    if problems:
        print(f"{len(problems)} dates or timings in comments of {files} files: move the "
              "measurement to docs/performance.md or docs/performance-history.md and keep "
              "the one-line reason in the comment")
        return 1
    print(f"no dates or timings in the comments of {files} files")
    return 0


if __name__ == "__main__":
    sys.exit(main())
