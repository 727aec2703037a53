#!/usr/bin/env python3
"""Sizes the code review holds src/ to (docs/ARCHITECTURE.md §1): no function over 80 lines and
no file over 1,000 lines, so that a function does one thing and a file one job.

A function is a top-level definition: a line starting in column 0 that is not a preprocessor,
comment, declaration or initializer line and ends with ')' (or ') {'), followed by its body from
the '{' in column 0 (or at the end of that line) to the '}' in column 0. Its length counts the
lines from its name to its closing brace. Before checking the tree it checks itself on made-up
sources, so it cannot pass by reading nothing. Exit 1 on any violation."""

import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_floors  # noqa: E402  (the sources of src/, read one way)

MAX_FUNCTION = 80
MAX_FILE = 1000
HEAD = re.compile(r"^[A-Za-z_][^;=]*\)\s*(\{\s*)?$")


def functions(text):
    """[(name, first line, length)] of the top-level function definitions in C source text."""
    out = []
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        start = i
        # a head may span lines: "static int f(int a,\n           int b)"
        if re.match(r"^[A-Za-z_]", line) and "(" in line and not line.startswith(("typedef", "#")):
            j = i
            head = line
            while not HEAD.match(head.strip() if j == i else head) and j + 1 < len(lines) and \
                    j - i < 6 and not head.rstrip().endswith((";", "}", "{")):
                j += 1
                head = head.rstrip() + " " + lines[j].strip()
            if HEAD.match(head) and not head.rstrip().endswith(";"):
                k = j if head.rstrip().endswith("{") else j + 1
                if k < len(lines) and lines[k].startswith("{") or head.rstrip().endswith("{"):
                    end = k
                    while end < len(lines) and not lines[end].startswith("}"):
                        end += 1
                    name = re.search(r"([A-Za-z_]\w*)\s*\(", head)
                    out.append((name.group(1) if name else "?", start + 1, end - start + 1))
                    i = end + 1
                    continue
        i += 1
    return out


def violations(files):
    bad = []
    for path, text in sorted(files.items()):
        n = text.count("\n")
        if n > MAX_FILE:
            bad.append("%s: %d lines (at most %d)" % (path, n, MAX_FILE))
        for name, line, length in functions(text):
            if length > MAX_FUNCTION:
                bad.append("%s:%d: %s is %d lines (at most %d)" %
                           (path, line, name, length, MAX_FUNCTION))
    return bad


def self_check():
    long_body = "\n".join("    x++;" for _ in range(MAX_FUNCTION))
    made_up = {
        "a.c": "static int small(int a,\n                 int b)\n{\n    return a + b;\n}\n",
        "b.c": "void big(void)\n{\n%s\n}\n" % long_body,
        "c.c": "int x;\n" * (MAX_FILE + 1),
        "d.c": "static const char *const names[] = {\n    \"a\",\n};\n",
    }
    got = violations(made_up)
    want = ["b.c:1: big is %d lines" % (MAX_FUNCTION + 3), "c.c: %d lines" % (MAX_FILE + 1)]
    if len(got) != len(want) or not all(g.startswith(w) for g, w in zip(got, want)):
        sys.exit("check_sizes.py does not find what it must on its made-up tree:\n  " +
                 "\n  ".join(got))


def main():
    return check_floors.run(self_check, violations, "over the size limits")


if __name__ == "__main__":
    sys.exit(main())
