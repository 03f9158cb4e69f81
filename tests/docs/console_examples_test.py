#!/usr/bin/python3
"""The README's and docs/'s shell examples, run as shown.

Collects every fenced block tagged ```sh or ```console (also bash, shell) in
README.md and docs/*.md and runs it with the build's binaries, on the bundled
model and the repository's fixtures:

  ```console   lines starting with "$ " are commands (a trailing "\\"
               continues one); the lines under a command, up to the next
               "$ ", are its expected output: compared line by line with its
               stdout (or, failing that, stdout then stderr), trailing blanks
               ignored; a line "..." stands for any number of lines, and a
               line ending in "..." for one line that starts with the rest
               (e.g. "Model: ..." for a path that differs by machine);
               a decimal number may differ by one in its last digit (the
               products' sums round differently on another CPU).
  ```sh        the block is one bash script (set -eo pipefail).

Each markdown file's blocks run in order in one temporary directory that
holds links to the repository's top-level entries and `build` -> the build
directory, so `build/bin/attnscope`, `models/...` and `tests/data/...` resolve
as the docs write them, and files an example writes (chat.json, exports)
stay out of the checkout. Commands that name `127.0.0.1:50051` (or the
metrics port `127.0.0.1:9464`) run against an attnscope-server this test
starts on free loopback ports, the addresses substituted.

An HTML comment just before a block (blank lines allowed) changes it:
  <!-- console-test: skip (REASON) -->  not run; the reason is required and
                                          printed (needs a network, a cluster,
                                          a display, runs for minutes, ...)
  <!-- console-test: exit N -->         every command must exit with N

Fails when a runnable example fails, when a directive is malformed, when
no example ran at all (it cannot pass on nothing), and when a relative link
of those pages names a file that does not exist or a heading that is not
there (GitHub's anchors: the heading lower-cased, punctuation dropped,
spaces as "-").

usage: console_examples_test.py --repo DIR --build DIR [--only FILE.md]
"""
import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

FENCE = re.compile(r"^```(\w*)\s*$")
DIRECTIVE = re.compile(r"^<!--\s*console-test:\s*(.*?)\s*-->\s*$")
SHELL_TAGS = {"sh", "bash", "shell"}
CONSOLE_TAGS = {"console"}
COMMAND_TIMEOUT_S = 60
SERVER_ADDRESS = "127.0.0.1:50051"
METRICS_ADDRESS = "127.0.0.1:9464"


class Block:
    def __init__(self, path, line, tag, body, directive):
        self.path, self.line, self.tag, self.body = path, line, tag, body
        self.directive = directive

    def where(self):
        return f"{self.path}:{self.line}"


def parse_blocks(path, rel):
    """The sh/console blocks of one markdown file, with their directives."""
    blocks, errors = [], []
    lines = open(path, encoding="utf-8").read().split("\n")
    i, pending = 0, None
    while i < len(lines):
        line = lines[i]
        m = DIRECTIVE.match(line.strip())
        if m:
            pending = (m.group(1), i + 1)
            i += 1
            continue
        f = FENCE.match(line)
        if f:
            tag = f.group(1).lower()
            start = i + 1
            j = i + 1
            while j < len(lines) and not lines[j].startswith("```"):
                j += 1
            if tag in SHELL_TAGS | CONSOLE_TAGS:
                directive = pending[0] if pending else None
                blocks.append(Block(rel, start, tag, lines[i + 1:j], directive))
            elif pending:
                errors.append(f"{rel}:{pending[1]}: console-test directive before a "
                              f"```{tag} block, which is never run")
            pending = None
            i = j + 1
            continue
        if line.strip() and pending:
            errors.append(f"{rel}:{pending[1]}: console-test directive not followed by a block")
            pending = None
        i += 1
    return blocks, errors


def parse_directive(block):
    """(skip_reason or None, expected exit status) of a block; ValueError if malformed."""
    d = block.directive
    if d is None:
        return None, 0
    m = re.fullmatch(r"skip\s*\((.+)\)", d)
    if m and m.group(1).strip():
        return m.group(1).strip(), 0
    m = re.fullmatch(r"exit\s+(\d+)", d)
    if m:
        return None, int(m.group(1))
    raise ValueError(f"{block.where()}: malformed directive '{d}' (use 'skip (REASON)' or 'exit N')")


def console_commands(block):
    """[(command, expected output lines)] of a console block."""
    out, cmd, expected = [], None, []
    lines = iter(block.body)
    for line in lines:
        if line.startswith("$ "):
            if cmd is not None:
                out.append((cmd, expected))
            cmd, expected = line[2:], []
            while cmd.endswith("\\"):
                cmd = cmd[:-1] + " " + next(lines, "").strip()
        elif cmd is not None:
            expected.append(line)
    if cmd is not None:
        out.append((cmd, expected))
    return out


DECIMAL = re.compile(r"[-+]?\d+\.\d+")


def last_digit_apart(expected, actual):
    """True when the two lines differ only in decimal numbers written with
    the same number of decimals, each by at most one unit in its last digit
    (a sum rounded on the other side of a digit: the matrix products add in
    a different order on another CPU)."""
    e_parts, a_parts = DECIMAL.split(expected), DECIMAL.split(actual)
    if e_parts != a_parts:
        return False
    for e, a in zip(DECIMAL.findall(expected), DECIMAL.findall(actual)):
        decimals = len(e.split(".")[1])
        if len(a.split(".")[1]) != decimals:
            return False
        if abs(int(e.replace(".", "")) - int(a.replace(".", ""))) > 1:
            return False
    return True


def line_matches(expected, actual):
    if expected.endswith("...") and expected != "...":
        return actual.startswith(expected[:-3])
    return expected == actual or last_digit_apart(expected, actual)


def matches(expected, actual):
    """Line-by-line match; an expected "..." line matches any run of lines, a
    line ending in "..." one line that starts with what precedes it."""
    e = [l.rstrip() for l in expected]
    a = [l.rstrip() for l in actual]
    while e and not e[-1]:
        e.pop()
    while a and not a[-1]:
        a.pop()
    memo = {}

    def go(i, j):
        if (i, j) in memo:
            return memo[(i, j)]
        if i == len(e):
            r = j == len(a)
        elif e[i] == "...":
            r = any(go(i + 1, k) for k in range(j, len(a) + 1))
        else:
            r = j < len(a) and line_matches(e[i], a[j]) and go(i + 1, j + 1)
        memo[(i, j)] = r
        return r

    return go(0, 0)


def first_difference(expected, actual):
    for k, (e, a) in enumerate(zip(expected, actual)):
        if not line_matches(e.rstrip(), a.rstrip()) and e != "...":
            return f"line {k + 1}: expected {e!r}\n                got {a!r}"
    return f"expected {len(expected)} lines, got {len(actual)}"


def slug(heading):
    """GitHub's anchor for a heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(path):
    out, counts, in_block = set(), {}, False
    for line in open(path, encoding="utf-8"):
        if line.startswith("```"):
            in_block = not in_block
            continue
        m = None if in_block else re.match(r"^#{1,6}\s+(.*?)\s*$", line)
        if m:
            s = slug(m.group(1))
            n = counts.get(s, 0)
            counts[s] = n + 1
            out.add(s if n == 0 else f"{s}-{n}")
    return out


def broken_links(repo, rel):
    """Relative links of one markdown file to a missing file or heading."""
    text, in_block = [], False
    for line in open(os.path.join(repo, rel), encoding="utf-8"):
        if line.startswith("```"):
            in_block = not in_block
        elif not in_block:
            text.append(line)
    text, out = "".join(text), []
    for m in re.finditer(r"\]\(([^)\s]+)\)", text):
        link = m.group(1)
        if re.match(r"^[a-z]+:", link):
            continue
        path, _, fragment = link.partition("#")
        target = os.path.normpath(os.path.join(repo, os.path.dirname(rel), path)) if path \
            else os.path.join(repo, rel)
        if not os.path.exists(target):
            out.append(f"{rel}: link to a missing file: {link}")
        elif fragment and target.endswith(".md") and fragment not in anchors(target):
            out.append(f"{rel}: link to a missing heading: {link}")
    return out


class Server:
    """An attnscope-server on free loopback ports, started on first use."""

    def __init__(self, build, repo):
        self.build, self.repo, self.proc = build, repo, None
        self.grpc = self.metrics = None

    def addresses(self):
        if self.proc is None:
            self.start()
        return self.grpc, self.metrics

    def start(self):
        self.proc = subprocess.Popen(
            [os.path.join(self.build, "bin", "attnscope-server"), "--listen", "127.0.0.1:0",
             "--metrics-listen", "127.0.0.1:0",
             "--model", "tiny-gpt2=" + os.path.join(self.repo, "models", "tiny-gpt2")],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, start_new_session=True)
        deadline = time.time() + 60
        while time.time() < deadline and (self.grpc is None or self.metrics is None):
            line = self.proc.stdout.readline()
            if not line:
                break
            m = re.match(r"attnscope-server listening on (\S+)", line)
            if m:
                self.grpc = m.group(1)
            m = re.match(r"metrics on (\S+)", line)
            if m:
                self.metrics = m.group(1)
        if self.grpc is None or self.metrics is None:
            self.stop()
            raise RuntimeError("attnscope-server did not print its addresses")

    def stop(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def make_sandbox(repo, build):
    d = tempfile.mkdtemp(prefix="attnscope-console-examples-")
    for name in os.listdir(repo):
        if name in ("build", ".git") or name.startswith("build-"):
            continue
        os.symlink(os.path.join(repo, name), os.path.join(d, name))
    os.symlink(build, os.path.join(d, "build"))
    return d


def run(command, cwd):
    p = subprocess.run(["bash", "-eo", "pipefail", "-c", command], cwd=cwd,
                       stdin=subprocess.DEVNULL, capture_output=True, text=True,
                       timeout=COMMAND_TIMEOUT_S)
    return p.returncode, p.stdout, p.stderr


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repo", required=True)
    ap.add_argument("--build", required=True)
    ap.add_argument("--only", help="run the blocks of this markdown file only (relative path)")
    args = ap.parse_args()
    repo, build = os.path.abspath(args.repo), os.path.abspath(args.build)
    for b in ("attnscope", "attnscope-engine", "attnscope-server"):
        if not os.access(os.path.join(build, "bin", b), os.X_OK):
            print(f"FAIL: {build}/bin/{b} is missing: build it first")
            return 1

    files = ["README.md"] + sorted(
        os.path.join("docs", f) for f in os.listdir(os.path.join(repo, "docs")) if f.endswith(".md"))
    if args.only:
        files = [f for f in files if f == args.only]
    failures, ran, skipped, server = [], 0, [], Server(build, repo)
    ran_per_file = {}
    env_start = time.time()
    try:
        for rel in files:
            blocks, errors = parse_blocks(os.path.join(repo, rel), rel)
            failures += errors + broken_links(repo, rel)
            sandbox = make_sandbox(repo, build)
            try:
                for block in blocks:
                    try:
                        reason, want_exit = parse_directive(block)
                    except ValueError as e:
                        failures.append(str(e))
                        continue
                    if reason is not None:
                        skipped.append(f"{block.where()}: {reason}")
                        continue
                    if block.tag in CONSOLE_TAGS:
                        commands = console_commands(block)
                        if not commands:
                            failures.append(f"{block.where()}: a console block without a '$ ' command")
                    else:
                        commands = [("\n".join(block.body), None)]
                    for command, expected in commands:
                        shown = command
                        if SERVER_ADDRESS in command or METRICS_ADDRESS in command:
                            grpc, metrics = server.addresses()
                            command = command.replace(SERVER_ADDRESS, grpc).replace(
                                METRICS_ADDRESS, metrics)
                        t0 = time.time()
                        try:
                            code, out, err = run(command, sandbox)
                        except subprocess.TimeoutExpired:
                            failures.append(f"{block.where()}: timed out after {COMMAND_TIMEOUT_S} s:"
                                            f"\n  {shown}")
                            continue
                        ran += 1
                        ran_per_file[rel] = ran_per_file.get(rel, 0) + 1
                        first = shown.strip().split("\n")[0]
                        print(f"ran {block.where()} ({time.time() - t0:.1f} s, exit {code}): {first}")
                        if code != want_exit:
                            failures.append(f"{block.where()}: exit {code}, expected {want_exit}:\n  "
                                            f"{shown}\n--- stderr:\n{err[-2000:]}")
                            continue
                        if expected is not None and any(l.strip() for l in expected):
                            so = out.split("\n")
                            both = (out + err).split("\n")
                            if not (matches(expected, so) or matches(expected, both)):
                                failures.append(f"{block.where()}: output differs:\n  {shown}\n  "
                                                f"{first_difference(expected, so)}")
            finally:
                shutil.rmtree(sandbox, ignore_errors=True)
    finally:
        server.stop()

    for s in skipped:
        print(f"skipped {s}")
    print(f"{ran} commands ran, {len(skipped)} blocks skipped, {time.time() - env_start:.1f} s")
    if ran == 0:
        failures.append("no runnable example was found: the test cannot pass on nothing")
    elif not args.only and "README.md" not in ran_per_file:
        failures.append("no example of README.md ran")
    for f in failures:
        print("FAIL: " + f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
