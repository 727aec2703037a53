#!/usr/bin/env python3
"""docs/components.md must equal `profcol components-markdown`, every shipped config must pass
`profcol validate`, and so must every profcol config shown in the Markdown docs (a stale
reference or a broken example config fails the build).

    check_docs.py BINARY SOURCE_DIR

YAML examples in the docs (every ```yaml / ```yml block of README.md, docs/*.md and the other
Markdown files of the repository, build*/, node_modules/ and dot directories left out):

  * a block with a top-level `service:` key is a whole profcol config: `profcol validate
    --config BLOCK` must accept it;
  * `<!-- profcol fragment over config/NAME.yaml -->` on the line before the fence (blank lines
    allowed): a fragment merged over a shipped config, validated as
    `--config config/NAME.yaml --config BLOCK`;
  * `<!-- not a profcol config: REASON -->`: not checked (another tool's config, such as the
    OpenTelemetry Collector's, or a piece of a config shown alone); the reason is required;
  * any other YAML block is an error: a fragment must say what it is.

Environment variables a checked block references without a default (`${env:NAME}`, `${NAME}`)
are set to dummy values, so an example may use `${env:PASSWORD}` as users would. Paths under /etc/profcol/ are
made by this test in a temp directory and the block's paths point there: TLS material made with
`openssl` (tls/ca.crt, tls/server.crt, tls/server.key, tls/client.crt, tls/client.key) and
secrets/token, secrets/password, secrets/htpasswd (a {SHA} entry for user `alice`), so a TLS or
auth example is validated with real files; a path under /etc/profcol/ not in that list fails.

Before the docs, the checker runs on a small built-in document whose faults it must report (a
broken whole config, an unmarked fragment, a marker without a reason, a fragment over a config
that does not exist, a path the fixtures do not have): a checker that cannot fail fails."""
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile

FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})(.*)$")
SKIP = re.compile(r"^\s*<!--\s*not a profcol config\s*(?::\s*(.*?))?\s*-->\s*$")
OVER = re.compile(r"^\s*<!--\s*profcol fragment over\s+(\S*)\s*-->\s*$")
ENV_REF = re.compile(r"\$\{(?:env:)?([A-Za-z_][A-Za-z0-9_]*)\}")  # without a default
FIXTURE_PATH = re.compile(r"/etc/profcol/[A-Za-z0-9_./-]+")
FIXTURES = ("tls/ca.crt", "tls/server.crt", "tls/server.key", "tls/client.crt", "tls/client.key",
            "secrets/token", "secrets/password", "secrets/htpasswd")


def yaml_blocks(text):
    """[(line, marker, argument, body)] of the ```yaml blocks of one document, and errors as
    (line, message). marker: None, 'skip' or 'over'."""
    lines = text.split("\n")
    out, errors = [], []
    pending = None
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if m:
            indent, fence, info = m.group(1), m.group(2), m.group(3).strip()
            lang = info.split()[0].lower() if info else ""
            body, j = [], i + 1
            close = re.compile(r"^\s*%s+\s*$" % re.escape(fence[0] * len(fence)))
            while j < len(lines) and not close.match(lines[j]):
                body.append(lines[j][len(indent):] if lines[j].startswith(indent)
                            else lines[j].lstrip())
                j += 1
            if lang in ("yaml", "yml"):
                marker, arg = (pending[1], pending[2]) if pending else (None, None)
                out.append((i + 1, marker, arg, "\n".join(body) + "\n"))
            elif pending:
                errors.append((pending[0], "a profcol config marker on a ```%s block" % lang))
            pending = None
            i = j + 1
            continue
        s, o = SKIP.match(lines[i]), OVER.match(lines[i])
        if s or o:
            if pending:
                errors.append((pending[0], "marker not followed by a ```yaml block"))
            if s and not (s.group(1) or "").strip():
                errors.append((i + 1, "`not a profcol config` needs a reason: "
                                      "<!-- not a profcol config: whose config it is -->"))
            pending = (i + 1, "skip", s.group(1)) if s else (i + 1, "over", o.group(1))
        elif lines[i].strip() and pending:
            errors.append((pending[0], "marker not followed by a ```yaml block"))
            pending = None
        i += 1
    if pending:
        errors.append((pending[0], "marker not followed by a ```yaml block"))
    return out, errors


def make_fixtures(d):
    """The files examples may name under /etc/profcol/, in d."""
    os.makedirs(os.path.join(d, "tls"))
    os.makedirs(os.path.join(d, "secrets"))
    tls = os.path.join(d, "tls")

    def openssl(*args):
        subprocess.run(["openssl"] + list(args), check=True, capture_output=True, timeout=60)

    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
            "-keyout", os.path.join(tls, "ca.key"), "-out", os.path.join(tls, "ca.crt"),
            "-days", "2", "-subj", "/CN=docs example CA",
            "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    for name, ext in (("server", "extendedKeyUsage=serverAuth\n"
                                 "subjectAltName=DNS:localhost,IP:127.0.0.1\n"),
                      ("client", "extendedKeyUsage=clientAuth\n")):
        with open(os.path.join(tls, name + ".ext"), "w") as f:
            f.write("basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\n" + ext)
        openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                "-keyout", os.path.join(tls, name + ".key"),
                "-out", os.path.join(tls, name + ".csr"), "-subj", "/CN=" + name)
        openssl("x509", "-req", "-in", os.path.join(tls, name + ".csr"),
                "-CA", os.path.join(tls, "ca.crt"), "-CAkey", os.path.join(tls, "ca.key"),
                "-set_serial", "7", "-days", "2", "-out", os.path.join(tls, name + ".crt"),
                "-extfile", os.path.join(tls, name + ".ext"))
    secrets = {"token": "docs-example-token\n", "password": "docs-example-password\n",
               # htpasswd -s: {SHA} base64(sha1("secret"))
               "htpasswd": "alice:{SHA}5en6G6MezRroT3XKqkdPOmY/BfQ=\n"}
    for name, text in secrets.items():
        with open(os.path.join(d, "secrets", name), "w") as f:
            f.write(text)


def check_block(binary, src, fixtures, path, line, marker, arg, body):
    """None if the block is fine or not a profcol config, else what is wrong with it."""
    if marker == "skip":
        return None
    whole = re.search(r"^service:", body, re.M) is not None
    base = []
    if marker == "over":
        path = os.path.join(src, arg or "")
        if not arg or not os.path.isfile(path):
            return "fragment over %r: no such config" % arg
        base = ["--config", path]
    elif not whole:
        return ("a YAML block that is not a whole profcol config (no top-level `service:`): mark "
                "it `<!-- profcol fragment over config/NAME.yaml -->` or "
                "`<!-- not a profcol config: REASON -->`")
    bad = [p for p in FIXTURE_PATH.findall(body) if p[len("/etc/profcol/"):] not in FIXTURES]
    if bad:
        return ("names %s: the test makes only /etc/profcol/{%s}"
                % (", ".join(sorted(set(bad))), ",".join(FIXTURES)))
    text = body.replace("/etc/profcol/", fixtures.rstrip("/") + "/")
    env = dict(os.environ)
    for name in ENV_REF.findall(text):
        env.setdefault(name, "dummy-" + name.lower())
    fd, cfg = tempfile.mkstemp(suffix=".yaml", prefix="docs-example-")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    try:
        r = subprocess.run([binary, "validate"] + base + ["--config", cfg], capture_output=True,
                           text=True, env=env, timeout=60)
    finally:
        os.unlink(cfg)
    if r.returncode != 0:
        # the temp file's line numbers as the document's
        text = re.sub(re.escape(cfg) + r":(\d+)", lambda m: "%s:%d" % (path, line + int(m.group(1))),
                      r.stderr.strip()).replace(cfg, path)
        return "profcol validate refused the example:\n    " + text.replace("\n", "\n    ")
    return None


def check_markdown(binary, src, fixtures, docs, out):
    """docs: {path: text}. Returns (checked blocks, failures)."""
    failures, checked = [], 0
    for path, text in docs.items():
        blocks, errors = yaml_blocks(text)
        failures += ["%s:%d: %s" % (path, line, msg) for line, msg in errors]
        for line, marker, arg, body in blocks:
            where = "%s:%d" % (path, line)
            if marker == "skip":
                out.write("skip %s (not a profcol config)\n" % where)
                continue
            why = check_block(binary, src, fixtures, path, line, marker, arg, body)
            checked += 1
            out.write("%s %s\n" % ("ok  " if why is None else "FAIL", where))
            if why:
                failures.append("%s: %s" % (where, why))
    return checked, failures


SELF_TEST = """# faults the checker must find

```yaml
receivers:
  otlp: {protocols: {http: {endpoint: localhost:4318}}}
exporters:
  debug: {verbosity: loud}
service:
  pipelines:
    profiles: {receivers: [otlp], exporters: [debug]}
```

```yaml
exporters:
  debug: {}
```

<!-- not a profcol config: -->
```yaml
a: b
```

<!-- profcol fragment over config/no-such.yaml -->
```yaml
a: b
```

```yaml
receivers:
  otlp: {protocols: {http: {tls: {cert_file: /etc/profcol/tls/nope.crt}}}}
service: {}
```

<!-- profcol fragment over config/default.yaml -->
```yaml
exporters:
  debug:
    verbosity: ${env:DOCS_SELFTEST_VERBOSITY:-basic}
```

<!-- not a profcol config: the OpenTelemetry Collector's -->
```yaml
connectors: {}
```
"""
SELF_TEST_WANT = ["selftest.md:3: profcol validate refused the example",
                  "selftest.md:13: a YAML block that is not a whole profcol config",
                  "selftest.md:18: `not a profcol config` needs a reason",
                  "selftest.md:24: fragment over 'config/no-such.yaml'",
                  "selftest.md:28: names /etc/profcol/tls/nope.crt"]


class Null:
    def write(self, s):
        pass


def markdown_files(src):
    found = []
    for root, dirs, names in os.walk(src):
        dirs[:] = sorted(d for d in dirs if not d.startswith((".", "build")) and
                         d not in ("node_modules", "subprojects"))
        found += [os.path.relpath(os.path.join(root, n), src) for n in names if n.endswith(".md")]
    return sorted(found)


def main():
    binary, src = sys.argv[1], sys.argv[2]
    failures = 0
    want = subprocess.run([binary, 'components-markdown'], check=True, capture_output=True,
                          text=True).stdout
    have = open(os.path.join(src, 'docs', 'components.md')).read()
    if want != have:
        print('docs/components.md is stale: run '
              '`build/profcol components-markdown > docs/components.md`')
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

    fixtures = tempfile.mkdtemp(prefix="profcol-docs-")
    try:
        make_fixtures(fixtures)
        _, got = check_markdown(binary, src, fixtures, {"selftest.md": SELF_TEST}, Null())
        missing = [w for w in SELF_TEST_WANT if not any(g.startswith(w) for g in got)]
        if missing or len(got) != len(SELF_TEST_WANT):
            print("the YAML example checker itself is broken: on its built-in faulty document it "
                  "reported\n  %s\nbut must report exactly\n  %s"
                  % ("\n  ".join(got), "\n  ".join(SELF_TEST_WANT)))
            return 1
        docs = {}
        for f in markdown_files(src):
            with open(os.path.join(src, f), encoding="utf-8") as fh:
                docs[f] = fh.read()
        n, bad = check_markdown(binary, src, fixtures, docs, sys.stdout)
    finally:
        shutil.rmtree(fixtures, ignore_errors=True)
    for b in bad:
        print("FAIL " + b)
    checks += n
    failures += len(bad)
    print('%d passed, %d failed' % (checks - failures, failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
