#!/usr/bin/env python3
"""Every shell command in the docs runs, or says why it cannot.

Scans every Markdown file of the repository (git's tracked and untracked-but-not-ignored files;
without git, a walk that skips build*/, node_modules/ and dot directories). In them:

  * every fenced block names its language (```text for synopses, diagrams and output);
  * every shell block (sh, bash, shell, console, zsh) is preceded, on the line before its fence
    (blank lines allowed), by exactly one marker:
        <!-- runnable -->
        <!-- not runnable: REASON -->
    so new docs must choose; a marker not followed by a fence is an error too;
  * indented code blocks (four spaces after a paragraph) are refused: they cannot carry a
    language or a marker;
  * every `curl` in a runnable block fails on an HTTP error (-f, --fail or --fail-with-body):
    otherwise a 4xx answer would pass as success.

Each runnable block runs under `bash -e -o pipefail` (60 s at most) in a temp directory that
links the repository's top-level entries (so `tests/data/...`, `config/...` resolve; `build`
points at the directory of the profcol under test), with a real profcol started on its embedded
default config (`profcol print-default-config`) and stopped afterwards (SIGTERM, exit 0, no
sanitizer report). The documented default ports (4318 OTLP/HTTP, 4317 OTLP/gRPC, 4040 Pyroscope,
8888 metrics, 13133 health) may be busy on a CI machine, so each is replaced by a free port, the
same way in the config and in the block's `host:port`s; a block naming a port the default
config does not use gets connection refused.

Before the docs, the checker is run on a small built-in document whose faults it must report
(an unmarked shell block, an unlabelled fence, a reasonless marker, a curl without --fail, and
README's old "try it" curl, which curl globs into `name=myappenv=dev`): a checker that cannot
fail fails.

    PROFCOL_BIN=build/profcol tests/check_commands.py"""
import os
import re
import shlex
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "e2e"))
import harness as h  # noqa: E402  (re-execs under Debian's python3; Profcol, free_port)

SHELL_LANGS = {"sh", "bash", "shell", "console", "zsh"}
RUNNABLE_LANGS = {"sh", "bash", "shell"}
DEFAULT_PORTS = (4318, 4317, 4040, 8888, 13133)
BLOCK_TIMEOUT = 60

FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})(.*)$")
MARKER = re.compile(r"^\s*<!--\s*(runnable|not runnable)\s*(?::\s*(.*?))?\s*-->\s*$")
LIST_ITEM = re.compile(r"^\s*([-*+]|\d+[.)])\s")


class Block:
    def __init__(self, path, line, lang, marker, reason, text):
        self.path, self.line, self.lang = path, line, lang
        self.marker, self.reason, self.text = marker, reason, text

    def where(self):
        return "%s:%d" % (self.path, self.line)


def parse(path, text):
    """(blocks, errors) of one Markdown document."""
    lines = text.split("\n")
    blocks, errors = [], []
    pending = None          # (line number, kind, reason) of a marker waiting for its fence
    prev = ""               # last non-blank line outside fences
    blank_before = False
    i = 0
    while i < len(lines):
        line = lines[i]
        m = FENCE.match(line)
        if m:
            indent, fence, info = m.group(1), m.group(2), m.group(3).strip()
            lang = info.split()[0].lower() if info else ""
            body, j = [], i + 1
            close = re.compile(r"^\s*%s%s*\s*$" % (re.escape(fence[0]) * len(fence),
                                                   re.escape(fence[0])))
            while j < len(lines) and not close.match(lines[j]):
                body.append(lines[j][len(indent):] if lines[j].startswith(indent)
                            else lines[j].lstrip())
                j += 1
            if j == len(lines):
                errors.append("%s:%d: fence never closed" % (path, i + 1))
            marker, reason = (pending[1], pending[2]) if pending else (None, None)
            if not lang:
                errors.append("%s:%d: fenced block without a language: write ```text for "
                              "synopses, diagrams and output, ```sh for commands" % (path, i + 1))
            elif lang in SHELL_LANGS and marker is None:
                errors.append("%s:%d: ```%s block without a marker: put `<!-- runnable -->` "
                              "(tests/check_commands.py runs it) or `<!-- not runnable: REASON -->`"
                              " on the line before the fence" % (path, i + 1, lang))
            elif marker is not None and lang not in SHELL_LANGS:
                errors.append("%s:%d: a runnable/not runnable marker on a ```%s block (only shell "
                              "blocks take one)" % (path, pending[0], lang))
            if marker == "runnable" and lang not in RUNNABLE_LANGS and lang in SHELL_LANGS:
                errors.append("%s:%d: runnable blocks are ```sh or ```bash scripts (no prompts)"
                              % (path, i + 1))
            blocks.append(Block(path, i + 1, lang, marker, reason, "\n".join(body) + "\n"))
            pending, prev, blank_before = None, line, False
            i = j + 1
            continue
        mk = MARKER.match(line)
        if mk:
            if pending:
                errors.append("%s:%d: marker not followed by a fenced block" % (path, pending[0]))
            kind, reason = mk.group(1), (mk.group(2) or "").strip()
            if kind == "not runnable" and not reason:
                errors.append("%s:%d: `not runnable` needs a reason: "
                              "<!-- not runnable: why -->" % (path, i + 1))
            if kind == "runnable" and reason:
                errors.append("%s:%d: `runnable` takes no argument" % (path, i + 1))
            pending = (i + 1, kind, reason)
        elif line.strip():
            if pending:
                errors.append("%s:%d: marker not followed by a fenced block" % (path, pending[0]))
                pending = None
            # an indented code block: four spaces after a blank line that follows a plain
            # (unindented, non-list, non-table) paragraph line
            if (re.match(r"^( {4}|\t)", line) and blank_before and prev and
                    not prev[0].isspace() and not LIST_ITEM.match(prev) and
                    not prev.lstrip().startswith(("|", "<"))):
                errors.append("%s:%d: indented code block: use a fenced block with a language "
                              "(and a marker if it is shell)" % (path, i + 1))
            prev = line
        blank_before = not line.strip()
        i += 1
    if pending:
        errors.append("%s:%d: marker not followed by a fenced block" % (path, pending[0]))
    for b in blocks:
        if b.marker == "runnable":
            errors += ["%s: %s" % (b.where(), e) for e in lint_runnable(b.text)]
    return blocks, errors


def lint_runnable(script):
    """Every curl must fail on an HTTP error status."""
    errors = []
    try:
        words = shlex.split(script.replace("\\\n", " "), comments=True)
    except ValueError as e:
        return ["cannot split into words: %s" % e]
    for k, w in enumerate(words):
        if os.path.basename(w) != "curl":
            continue
        fails = False
        for a in words[k + 1:]:
            if a in ("|", "||", "&&", ";") or a.endswith(";"):
                break
            if a in ("-f", "--fail", "--fail-with-body") or re.match(r"^-[a-zA-Z]*f[a-zA-Z]*$", a):
                fails = True
        if not fails:
            errors.append("a curl without -f/--fail/--fail-with-body: an HTTP error would pass")
    return errors


def markdown_files(src):
    try:
        out = subprocess.run(["git", "-C", src, "ls-files", "--cached", "--others",
                              "--exclude-standard", "--", "*.md"], capture_output=True,
                             text=True, timeout=30, check=True).stdout.split("\n")
        files = sorted({f for f in out if f and os.path.isfile(os.path.join(src, f))})
        if files:
            return [f for f in files if "node_modules/" not in f]
    except (OSError, subprocess.SubprocessError):
        pass
    found = []
    for root, dirs, names in os.walk(src):
        dirs[:] = [d for d in dirs if not d.startswith((".", "build")) and d != "node_modules"]
        found += [os.path.relpath(os.path.join(root, n), src) for n in names if n.endswith(".md")]
    return sorted(found)


# ---------------------------------------------------------------------------------------------
# running a block

def workdir(src, bin_dir):
    """A temp dir whose entries link to the repository's, `build` to the binary's directory."""
    d = tempfile.mkdtemp(prefix="docs-", dir=h.TMP)
    for name in os.listdir(src):
        if name == "build" or name.startswith(".git"):
            continue
        os.symlink(os.path.join(src, name), os.path.join(d, name))
    os.symlink(bin_dir, os.path.join(d, "build"))
    return d


def with_ports(text, ports):
    """host:PORT for each documented default port -> host:free port."""
    return re.sub(r"(?<=[\w\]]):(%s)\b" % "|".join(str(p) for p in DEFAULT_PORTS),
                  lambda m: ":%d" % ports[int(m.group(1))], text)


def run_block(block, src, default_config):
    """None if the block ran and profcol stopped cleanly, else a description of the failure."""
    ports = {p: h.free_port() for p in DEFAULT_PORTS}
    config = with_ports(default_config, ports)
    overlay = ("service:\n  telemetry:\n    metrics:\n      address: localhost:%d\n"
               % ports[8888])
    wait = [ports[p] for p in DEFAULT_PORTS if p != 8888 and ":%d" % ports[p] in config]
    wait.append(ports[8888])
    script = with_ports(block.text, ports)
    p = h.Profcol([config, overlay], wait_ports=wait, name="docs")
    p.start()
    try:
        r = subprocess.run(["bash", "--noprofile", "--norc", "-e", "-o", "pipefail", "-c",
                            script], cwd=workdir(src, os.path.dirname(os.path.abspath(h.BIN))),
                           capture_output=True, text=True, timeout=BLOCK_TIMEOUT,
                           stdin=subprocess.DEVNULL)
        failure = None
        if r.returncode != 0:
            failure = ("exit status %d\n--- script (ports %s) ---\n%s--- stdout ---\n%s\n"
                       "--- stderr ---\n%s\n--- profcol ---\n%s"
                       % (r.returncode, ", ".join("%d->%d" % kv for kv in ports.items()),
                          script, r.stdout[-2000:], r.stderr[-2000:], p.stderr()[-2000:]))
        p.stop()  # exit 0 after SIGTERM, no sanitizer report
        return failure
    except subprocess.TimeoutExpired:
        return "did not finish within %d s" % BLOCK_TIMEOUT
    except AssertionError as e:
        return "profcol: %s" % e
    finally:
        p.kill()


def check(docs, src, default_config, out):
    """docs: {path: text}. Returns the list of failures; prints one line per block to out."""
    failures = []
    for path, text in docs.items():
        blocks, errors = parse(path, text)
        failures += errors
        for b in blocks:
            if b.lang not in SHELL_LANGS:
                continue
            if b.marker is None:
                continue  # reported by parse()
            if b.marker != "runnable":
                out.write("skip %s (not runnable: %s)\n" % (b.where(), b.reason))
                continue
            why = run_block(b, src, default_config)
            out.write("%s %s\n" % ("ok  " if why is None else "FAIL", b.where()))
            if why:
                failures.append("%s: the runnable block failed: %s" % (b.where(), why))
    return failures


SELF_TEST = """# faults the checker must find

```sh
echo an unmarked shell block
```

```
an unlabelled fence
```

<!-- not runnable: -->
```sh
true
```

<!-- runnable -->
```sh
curl -s http://localhost:4040/ingest
```

<!-- runnable -->
```sh
curl --fail-with-body -X POST 'http://localhost:4040/ingest?name=myapp{env=dev}&format=pprof' \\
     --data-binary @tests/data/go-cpu.pb.gz
```

    an indented block after a paragraph

<!-- runnable -->
"""
SELF_TEST_WANT = ["selftest.md:3: ```sh block without a marker",
                  "selftest.md:7: fenced block without a language",
                  "selftest.md:11: `not runnable` needs a reason",
                  "selftest.md:17: a curl without -f",
                  "selftest.md:22: the runnable block failed: exit status 22",
                  "selftest.md:27: indented code block",
                  "selftest.md:29: marker not followed by a fenced block"]


class Null:
    def write(self, s):
        pass


def main():
    src = os.path.abspath(h.SRC)
    r = h.run_profcol(["print-default-config"])
    if r.returncode != 0:
        print("profcol print-default-config failed: %s" % r.stderr)
        return 1
    default_config = r.stdout

    got = check({"selftest.md": SELF_TEST}, src, default_config, Null())
    missing = [w for w in SELF_TEST_WANT if not any(g.startswith(w) for g in got)]
    if missing or len(got) != len(SELF_TEST_WANT):
        print("the checker itself is broken: on its built-in faulty document it reported\n  %s\n"
              "but must report exactly\n  %s" % ("\n  ".join(got), "\n  ".join(SELF_TEST_WANT)))
        return 1

    files = markdown_files(src)
    docs = {}
    for f in files:
        with open(os.path.join(src, f), encoding="utf-8") as fh:
            docs[f] = fh.read()
    failures = check(docs, src, default_config, sys.stdout)
    for f in failures:
        print("FAIL " + f)
    print("%d Markdown files; %d problem(s)" % (len(files), len(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
