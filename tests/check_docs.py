#!/usr/bin/env python3
"""docs/components.md must equal `profcol components-markdown`, and every shipped config must
pass `profcol validate` (a stale reference or a broken example config fails the build)."""
import glob
import re
import os
import subprocess
import sys

binary, src = sys.argv[1], sys.argv[2]
failures = 0
want = subprocess.run([binary, 'components-markdown'], check=True, capture_output=True,
                      text=True).stdout
have = open(os.path.join(src, 'docs', 'components.md')).read()
if want != have:
    print('docs/components.md is stale: run `build/profcol components-markdown > docs/components.md`')
    failures += 1
configs = sorted(glob.glob(os.path.join(src, 'config', '*.yaml')))
for cfg in configs:
    # an opt-in fragment says on its first line what it is merged over
    m = re.match(r'# Opt-in for (config/\S+\.yaml)', open(cfg).readline())
    args = ['--config', os.path.join(src, m.group(1))] if m else []
    r = subprocess.run([binary, 'validate'] + args + ['--config', cfg], capture_output=True,
                       text=True, env=dict(os.environ, API_TOKEN='t'))
    if r.returncode != 0:
        print('%s: %s' % (cfg, r.stderr.strip()))
        failures += 1
checks = 1 + len(configs)
print('%d passed, %d failed' % (checks - failures, failures))
sys.exit(1 if failures else 0)
