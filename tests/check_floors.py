#!/usr/bin/env python3
"""The floors of src/ (docs/ARCHITECTURE.md): a file includes only from its own folder or from
a floor below, and the two rooms of floor 1 know nothing of each other.

    floor 0  base/                                   allocation, log, buffers, codecs, budgets, hash
    floor 1  pdata/   net/                           the model; the network (neither sees the other)
    floor 2  formats/ sdk/                           input translators; the component SDK
    floor 3  receivers/ processors/ exporters/ extensions/ connectors/   the components
             service/                                the graph that runs them (includes none)
    floor 4  main.c                                  the command line

The SDK's private headers (`sdk/internal/`) are for the SDK itself and the service only: a
component includes the SDK's public headers.

Checks every `#include "..."` of src/ (generated *.pb-c.h headers are the protocol's, usable
from floor 1 up). Before checking the tree, it checks itself on a small made-up tree with one
include of each forbidden kind, so it cannot pass by reading nothing. Exit 1 on any violation."""

import os
import re
import sys

FLOORS = {"base": 0, "pdata": 1, "net": 1, "formats": 2, "sdk": 2, "receivers": 3,
          "processors": 3, "exporters": 3, "extensions": 3, "connectors": 3, "service": 3,
          "main.c": 4}
PRIVATE = "sdk/internal/"  # included only from sdk/ and service/
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def room(path):
    """'pdata' for 'pdata/json.c' (paths relative to src/)."""
    return path.split("/", 1)[0]


def violations(files):
    """files: {path relative to src/: text}. Returns ["a.c: includes x/y.h: why", ...]."""
    out = []
    for path, text in sorted(files.items()):
        r = room(path)
        if r not in FLOORS:
            out.append("%s: not in any floor (add its folder to tests/check_floors.py)" % path)
            continue
        for inc in INCLUDE.findall(text):
            if inc.endswith(".pb-c.h"):
                if FLOORS[r] < 1:
                    out.append("%s: includes %s: protocol types start at floor 1" % (path, inc))
                continue
            if "/" not in inc:
                continue  # a header beside it (same folder)
            if inc.startswith(PRIVATE) and r not in ("sdk", "service"):
                out.append("%s: includes %s: the SDK's private headers are for sdk/ and service/"
                           % (path, inc))
                continue
            target = room(inc)
            if target not in FLOORS:
                out.append("%s: includes %s from outside the floors" % (path, inc))
            elif target == r:
                continue
            elif FLOORS[target] > FLOORS[r]:
                out.append("%s: includes %s: floor %d reaches up to floor %d" %
                           (path, inc, FLOORS[r], FLOORS[target]))
            elif FLOORS[target] == FLOORS[r]:
                out.append("%s: includes %s: rooms of one floor do not include each other" %
                           (path, inc))
    return out


def self_check():
    made_up = {
        "base/a.c": '#include "base/a.h"\n#include "sdk/log.h"\n',
        "exporters/i.c": '#include "sdk/internal/queue.h"\n#include "sdk/exporter.h"\n',
        "service/j.c": '#include "sdk/internal/queue.h"\n',
        "net/b.c": '#include "pdata/pdata.h"\n#include "base/buf.h"\n',
        "pdata/c.c": '#include "otlp.pb-c.h"\n#include "pdata/c.h"\n',
        "receivers/d.c": '#include "exporters/e.h"\n#include "sdk/component.h"\n',
        "sdk/f.c": '#include "extensions/g.h"\n',
        "tools/h.c": "",
    }
    got = violations(made_up)
    want = ["base/a.c: includes sdk/log.h", "exporters/i.c: includes sdk/internal/queue.h",
            "net/b.c: includes pdata/pdata.h", "receivers/d.c: includes exporters/e.h",
            "sdk/f.c: includes extensions/g.h",
            "tools/h.c: not in any floor"]
    if len(got) != len(want) or not all(g.startswith(w) for g, w in zip(got, want)):
        sys.exit("check_floors.py does not find what it must on its made-up tree:\n  " +
                 "\n  ".join(got))


def sources(root):
    """{path relative to src/: text} of every .c and .h under root/src (check_sizes.py too)."""
    src = os.path.join(root, "src")
    files = {}
    for dirpath, _, names in os.walk(src):
        for n in names:
            if n.endswith((".c", ".h")):
                p = os.path.join(dirpath, n)
                with open(p, encoding="utf-8") as f:
                    files[os.path.relpath(p, src)] = f.read()
    return files


def run(self_check, violations, what):
    """A check's main: its self-check, then every source's violations printed; 1 if any."""
    self_check()
    files = sources(sys.argv[1] if len(sys.argv) > 1 else ".")
    bad = violations(files)
    for v in bad:
        print(v)
    print("%d files, %d %s" % (len(files), len(bad), what))
    return 1 if bad else 0


def main():
    return run(self_check, violations, "include(s) against the floors")


if __name__ == "__main__":
    sys.exit(main())
