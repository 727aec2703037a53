#!/usr/bin/env python3
"""The symbolizer processor end to end (issue 23). C (with a shared library) and C++ programs are
compiled here with -O2 -g (tests/e2e/symbolizer/), their debug info split off with objcopy
(--only-keep-debug, --strip-all/--strip-debug, --add-gnu-debuglink) into a /usr/lib/debug style
build-id directory; profiles shaped like the OpenTelemetry eBPF profiler's (mappings with
`process.executable.build_id.gnu`, `profile.frame.type: native`, no lines; ELF addresses, and
runtime addresses of a mapping loaded elsewhere) go through profcol (otlp -> symbolizer ->
otlphttp -> Sink). The oracle is binutils' `addr2line -a -f -i -C -e` on the unstripped binaries:
every location's lines (function, file, line, innermost first) must equal its output. Also the
symbol-table fallback (a binary without -g, as an `elf_files` entry), unresolved locations
counted by reason (hostile and unknown build ids) with `fallback_name`, and the cache. Rust is
built twice (legacy and v0 mangling). Mappings with only an htlhash or a Go build id are matched
in an `elf_files` directory; a Go program stripped with -ldflags='-s -w' is resolved from its
.gopclntab, the oracle `go tool addr2line` (Go's own reader). The faults are in
test_symbolizer_faults.py."""
import os
import glob
import hashlib
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402
import signal_support as ss  # noqa: E402

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "symbolizer")
BIAS = 0x7F3A12340000  # where the runtime-address profiles say a binary was loaded


def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120, **kw)
    if r.returncode != 0:
        raise AssertionError("%s failed: %s" % (" ".join(cmd), r.stderr[-2000:]))
    return r.stdout


def build_id(path):
    m = re.search(r"Build ID: ([0-9a-f]+)", run(["readelf", "-nW", path]))
    return m.group(1)


def htlhash(path):
    """The htlhash of a file (../shared/spec/symbolization.md §1.5) with hashlib: SHA-256 of the
    first 4096 bytes, the last 4096 bytes and the length as a big-endian u64; 16 bytes in hex."""
    with open(path, "rb") as f:
        data = f.read()
    return hashlib.sha256(data[:4096] + data[-4096:] + struct.pack(">Q", len(data))).hexdigest()[:32]


def go_env(tmp):
    return dict(os.environ, GOCACHE=h.GO_CACHE, GOPATH=os.path.join(tmp, "gopath"),
                GOFLAGS="-mod=mod", GOPROXY="off", GO111MODULE="off")


def build_go(tmp, src, out, *flags):
    """The Go test program built with the machine's go (None without one)."""
    if not shutil.which("go"):
        return None
    run(["go", "build", *flags, "-o", out, src], env=go_env(tmp), cwd=tmp)
    return out


def go_addr2line(tmp, path, addrs):
    """{address: (function, file, line)} from `go tool addr2line`, which reads the binary's
    .gopclntab itself: the function not inlined, and the position of the innermost inlined
    code. (binutils 2.40 reads Go 1.2x's DWARF 5 line table as file go.go, line 0.)"""
    text = run(["go", "tool", "addr2line", path], input="".join("0x%x\n" % a for a in addrs),
               env=go_env(tmp))
    lines = text.splitlines()
    out = {}
    for i, a in enumerate(addrs):
        file, _, line = lines[2 * i + 1].rpartition(":")
        out[a] = (lines[2 * i], file, int(line) if line.isdigit() else 0)
    return out


def llvm_symbolizer(path, addrs):
    """{address: [(function, file, line), ...] innermost first} from LLVM's llvm-symbolizer
    --inlining on a Go binary with DWARF (an independent DWARF reader that, unlike binutils
    2.40, reads Go 1.2x's line tables and inlined subroutines); None without the tool."""
    tool = shutil.which("llvm-symbolizer") or next(iter(sorted(glob.glob(
        "/usr/bin/llvm-symbolizer-*"))), None)
    if not tool:
        return None
    text = run([tool, "--obj=" + path, "--inlining"], input="".join("0x%x\n" % a for a in addrs))
    out = {}
    for a, block in zip(addrs, text.strip("\n").split("\n\n")):
        lines = block.splitlines()
        out[a] = [(lines[i], lines[i + 1].rsplit(":", 2)[0], int(lines[i + 1].rsplit(":", 2)[1]))
                  for i in range(0, len(lines) - 1, 2)]
    return out


def go_matches(got, want):
    """profcol's lines (innermost first) against go tool addr2line's (function, file, line)."""
    return bool(got) and (got[-1][0], got[0][1], got[0][2]) == want


def exec_load(path):
    """(offset, vaddr, filesz, memsz) of the executable PT_LOAD, from readelf -lW."""
    for line in run(["readelf", "-lW", path]).splitlines():
        f = line.split()
        if f and f[0] == "LOAD" and "E" in f[6:-1]:
            return tuple(int(x, 16) for x in f[1:3] + f[4:6])
    raise AssertionError("no executable PT_LOAD in " + path)


def text_addresses(path, want):
    """Instruction addresses (objdump -d) of the functions whose symbol want(name) accepts,
    inside the symbol's size (nm -S): the padding after a function is no frame."""
    sizes = {}
    for line in run(["nm", "-S", "--defined-only", path]).splitlines():
        f = line.split()
        if len(f) == 4:
            sizes[int(f[0], 16)] = int(f[1], 16)
    out, keep, start = [], False, 0
    for line in run(["objdump", "-d", "--no-show-raw-insn", path]).splitlines():
        m = re.match(r"^([0-9a-f]+) <(.+)>:$", line)
        if m:
            start = int(m.group(1), 16)
            keep = want(m.group(2)) and start in sizes
            continue
        m = re.match(r"^\s+([0-9a-f]+):\s", line)
        if keep and m and int(m.group(1), 16) < start + sizes[start]:
            out.append(int(m.group(1), 16))
    return sorted(set(out))


def addr2line(path, addrs):
    """{address: [(function, file, line), ...] innermost first} from binutils' addr2line."""
    text = run(["addr2line", "-a", "-f", "-i", "-C", "-e", path],
               input="".join("0x%x\n" % a for a in addrs))
    out, cur, lines = {}, None, text.splitlines()
    i = 0
    while i < len(lines):
        if re.match(r"^0x[0-9a-f]{16}$", lines[i]):
            cur = int(lines[i], 16)
            out[cur] = []
            i += 1
            continue
        func, pos = lines[i], lines[i + 1]
        i += 2
        pos = re.sub(r" \(discriminator \d+\)$", "", pos)
        file, _, line = pos.rpartition(":")
        out[cur].append((func, file, int(line) if line.isdigit() else 0))
    return out


def symbols(path):
    """[(start, end, demangled name)] of the function symbols (nm -C -S)."""
    out = []
    for line in run(["nm", "-C", "-S", "--defined-only", path]).splitlines():
        m = re.match(r"^([0-9a-f]+) ([0-9a-f]+) [tTwW] (.+)$", line)
        if m:
            start = int(m.group(1), 16)
            out.append((start, start + int(m.group(2), 16), m.group(3)))
    return out


def binutils_names(got, want, syms, addr):
    """got with binutils' one naming rule applied: a function whose DWARF name is not a linkage
    name (a lambda's artificial `operator()`) is shown by addr2line under the ELF symbol when that
    symbol starts where the inlined instance does (bfd's dwarf2.c). profcol keeps the DWARF name;
    only that case is mapped, and only to the symbol that holds the address."""
    sym = next((n for s, e, n in syms if s <= addr < e), None)
    out = []
    for i, (name, file, line) in enumerate(got):
        if (i < len(want) and name != want[i][0] and want[i][0] == sym and
                "::" not in name):
            name = sym
        out.append((name, file, line))
    return out


class Binary:
    """One compiled program: the unstripped file (the oracle's), its split debug file in the
    build-id directory and its stripped executable."""

    def __init__(self, tmp, name, full, dbgdir, exe_in_dir, strip):
        self.name, self.full = name, full
        self.id = build_id(full)
        self.load = exec_load(full)
        sub = os.path.join(dbgdir, ".build-id", self.id[:2])
        os.makedirs(sub, exist_ok=True)
        self.debug = os.path.join(sub, self.id[2:] + ".debug")
        run(["objcopy", "--only-keep-debug", full, self.debug])
        self.stripped = os.path.join(tmp, "stripped", name)
        os.makedirs(os.path.dirname(self.stripped), exist_ok=True)
        run(["objcopy", strip, full, self.stripped])
        run(["objcopy", "--add-gnu-debuglink=" + self.debug, self.stripped])
        if exe_in_dir:
            shutil.copy(self.stripped, os.path.join(sub, self.id[2:]))


def build_all(tmp):
    src = os.path.join(tmp, "src")
    shutil.copytree(HERE, src)
    out = os.path.join(tmp, "full")
    os.makedirs(out)
    dbg = os.path.join(tmp, "debug")
    lib = os.path.join(out, "libshared.so")
    # compiled from its own directory: DWARF file names relative to DW_AT_comp_dir, which
    # addr2line joins (the others are compiled by absolute path)
    run(["gcc", "-O2", "-g", "-fPIC", "-shared", "-Wl,--build-id", "-o", lib, "shared.c"],
        cwd=src)
    prog = os.path.join(out, "prog")
    run(["gcc", "-O2", "-g", "-Wl,--build-id", "-o", prog, os.path.join(src, "prog.c"),
         "-L" + out, "-lshared"])
    progxx = os.path.join(out, "progxx")
    run(["g++", "-O2", "-g", "-Wl,--build-id", "-o", progxx, os.path.join(src, "prog.cc")])
    nodebug = os.path.join(out, "prog-nodebug")
    run(["gcc", "-O2", "-Wl,--build-id", "-o", nodebug, os.path.join(src, "prog.c"),
         "-L" + out, "-lshared"])
    bins = {}
    if shutil.which("clang"):  # DWARF 5 without .debug_aranges: units found by their ranges
        progcl = os.path.join(out, "progcl")
        run(["clang", "-O2", "-g", "-Wl,--build-id", "-o", progcl, os.path.join(src, "prog.c"),
             "-L" + out, "-lshared"])
        bins["clang"] = Binary(tmp, "progcl", progcl, dbg, True, "--strip-all")
    rustc = shutil.which("rustc") or os.path.expanduser("~/.cargo/bin/rustc")
    if os.access(rustc, os.X_OK):
        progrs = os.path.join(out, "progrs")
        run([rustc, "-C", "opt-level=2", "-C", "debuginfo=2", "-C", "link-arg=-Wl,--build-id",
             "-o", progrs, os.path.join(src, "prog.rs")])
        bins["rust"] = Binary(tmp, "progrs", progrs, dbg, True, "--strip-debug")
        # the same program with v0 mangling (_R...; stable since rustc 1.59): demangled by
        # libiberty as by addr2line -C (docs/symbolization.md §7)
        progv0 = os.path.join(out, "progv0")
        run([rustc, "-C", "opt-level=2", "-C", "debuginfo=2", "-C", "link-arg=-Wl,--build-id",
             "-C", "symbol-mangling-version=v0", "-o", progv0, os.path.join(src, "prog.rs")])
        bins["rustv0"] = Binary(tmp, "progv0", progv0, dbg, True, "--strip-debug")
    return dict(bins, **{
        # the library: only its debug file (the eBPF profiler's ELF addresses need no more)
        "lib": Binary(tmp, "libshared.so", lib, dbg, False, "--strip-debug"),
        # prog: debug file in the directory, the stripped executable as an elf_files entry
        "prog": Binary(tmp, "prog", prog, dbg, False, "--strip-all"),
        # progxx: both in the directory
        "progxx": Binary(tmp, "progxx", progxx, dbg, True, "--strip-debug"),
    }), dbg, nodebug


WANT = {
    "lib": lambda s: s == "shared_hash",
    "prog": lambda s: s in ("crunch", "main"),
    "progxx": lambda s: "shop" in s or s == "main",
    "clang": lambda s: s in ("crunch", "main"),
    "rust": lambda s: s.startswith("_ZN4prog"),  # prog::shop::*, prog::main (mangled, legacy)
    # v0: a path rooted in the crate prog (Cs<hash>_4prog), generic instances included
    "rustv0": lambda s: re.match(r"^_R[A-Za-z0-9_]*Cs[0-9A-Za-z]*_4prog4(shop|main)", s),
}


class Request:
    """An ExportProfilesServiceRequest shaped like the eBPF profiler's: one mapping per binary,
    one native location per address (no lines), one sample per location."""

    def __init__(self):
        self.req = h.pb.Request()
        d = self.d = self.req.dictionary
        self.strings = {}
        d.string_table.append("")
        for t in (d.mapping_table, d.location_table, d.function_table, d.attribute_table,
                  d.stack_table):
            t.add()
        d.link_table.add(trace_id=b"\0" * 16, span_id=b"\0" * 8)
        rp = self.req.resource_profiles.add()
        rp.resource.attributes.add(key="service.name").value.string_value = "symbolizer-e2e"
        self.p = rp.scope_profiles.add().profiles.add()
        self.p.sample_type.type_strindex = self.s("cpu")
        self.p.sample_type.unit_strindex = self.s("nanoseconds")
        self.native = self.attr("profile.frame.type", "native")
        self.where = {}  # location index -> (mapping key, address as the oracle knows it)

    def s(self, text):
        if text not in self.strings:
            self.strings[text] = len(self.d.string_table)
            self.d.string_table.append(text)
        return self.strings[text]

    def attr(self, key, value):
        a = self.d.attribute_table.add(key_strindex=self.s(key))
        a.value.string_value = value
        return len(self.d.attribute_table) - 1

    def mapping(self, name, build_id, load, bias=0, ids=None):
        """ids: {attribute key: value} of build ids instead of build_id (the GNU one)."""
        off, vaddr, _, memsz = load
        page = ~0xFFF
        attrs = [self.attr("process.executable.build_id.gnu", build_id)] if build_id else []
        attrs += [self.attr(k, v) for k, v in (ids or {}).items()]
        start = bias + (vaddr & page)
        self.d.mapping_table.add(memory_start=start, memory_limit=start + memsz + 0x1000,
                                 file_offset=off & page, filename_strindex=self.s(name),
                                 attribute_indices=attrs)
        return len(self.d.mapping_table) - 1

    def location(self, mapping, address, key, oracle_addr):
        self.d.location_table.add(mapping_index=mapping, address=address,
                                  attribute_indices=[self.native])
        li = len(self.d.location_table) - 1
        self.d.stack_table.add(location_indices=[li])
        self.p.samples.add(stack_index=len(self.d.stack_table) - 1, values=[1])
        self.where[li] = (key, oracle_addr)
        return li

    def body(self):
        return self.req.SerializeToString()


def lines_of(msg, li):
    """(function name, file, line) of each Line of location li in a received request."""
    d = msg.dictionary
    out = []
    for ln in d.location_table[li].lines:
        f = d.function_table[ln.function_index]
        out.append((d.string_table[f.name_strindex], d.string_table[f.filename_strindex], ln.line))
    return out


def config(port, mport, sink, dbgdir, elf_files, extra="", receiver="otlp"):
    s = (h.otlp_receiver_yaml(port) if receiver == "otlp" else
         "receivers:\n  pyroscope:\n    endpoint: 127.0.0.1:%d\n" % port)
    s += "processors:\n  symbolizer:\n    debug_dirs: [%s]\n    elf_files: [%s]\n%s" % (
        dbgdir or "", ", ".join(elf_files), extra)
    s += "exporters:\n  otlphttp:\n    endpoint: %s\n" % sink
    s += ("service:\n  telemetry:\n    metrics:\n      address: 127.0.0.1:%d\n" % mport +
          "  pipelines:\n    profiles:\n      receivers: [otlp]\n"
          "      processors: [symbolizer]\n      exporters: [otlphttp]\n").replace(
              "receivers: [otlp]", "receivers: [%s]" % receiver)
    return s


class Programs(unittest.TestCase):
    """Builds the programs once per class; starts profcol on a symbolizer config."""

    @classmethod
    def setUpClass(cls):
        for tool in ("gcc", "g++", "objcopy", "addr2line", "readelf", "objdump", "nm"):
            if not shutil.which(tool):
                raise unittest.SkipTest("skipped: %s not installed" % tool)
        cls.tmp = tempfile.mkdtemp(prefix="profcol-sym-")
        cls.bins, cls.dbgdir, cls.nodebug = build_all(cls.tmp)
        cls.addrs = {k: text_addresses(b.full, WANT[k]) for k, b in cls.bins.items()}
        cls.oracle = {k: addr2line(cls.bins[k].full, a) for k, a in cls.addrs.items()}
        cls.symbols = {k: symbols(b.full) for k, b in cls.bins.items()}

    @classmethod
    def tearDownClass(cls):
        if not os.environ.get("E2E_KEEP"):
            shutil.rmtree(cls.tmp, ignore_errors=True)

    def start(self, extra="", elf_files=None, receiver="otlp"):
        sink = h.Sink().start()
        self.addCleanup(sink.stop)
        port, mport = h.free_port(), h.free_port()
        files = elf_files if elf_files is not None else [self.bins["prog"].stripped]
        pc = h.Profcol(config(port, mport, sink.url, self.dbgdir, files, extra, receiver),
                       wait_ports=[port, mport], name="symbolizer").start()
        self.addCleanup(pc.kill)
        return sink, port, mport, pc

    def send(self, sink, port, req, n_before=0):
        r = h.post(port, req.body())
        self.assertEqual(r.status, 200, r.body[:300])
        sink.wait_requests(n_before + 1, timeout=30)
        return sink.messages()[n_before]

    def check_against_oracle(self, msg, req):
        checked = inlined = 0
        for li, (key, addr) in req.where.items():
            want = self.oracle[key][addr]
            got = lines_of(msg, li)
            if want and want[0][0] == "??":
                self.assertEqual(got, [], "%s 0x%x: addr2line knows nothing" % (key, addr))
                continue
            if key == "clang":
                # clang's DWARF 5 gives inlined instances DW_AT_ranges (rnglistx, offset pairs)
                # that binutils 2.40 does not see: at 0x1170 of progcl it names `crunch` at
                # step's line 19. There only what both read alike is compared: the position
                # from the line table and the function that was not inlined.
                self.assertTrue(got, "%s 0x%x" % (key, addr))
                self.assertEqual((got[0][1:], got[-1][0]), (want[0][1:], want[-1][0]),
                                 "%s 0x%x" % (key, addr))
                checked += 1
                continue
            self.assertEqual(binutils_names(got, want, self.symbols[key], addr), want,
                             "%s 0x%x" % (key, addr))
            checked += 1
            inlined += len(want) > 1
        return checked, inlined



class SymbolizerTest(Programs):
    """Local sources: the build-id directory and elf_files."""

    def test_ebpf_addresses_equal_addr2line(self):
        """ELF addresses (the eBPF profiler's), every instruction of the chosen functions."""
        sink, port, mport, pc = self.start()
        req = Request()
        for key, b in self.bins.items():
            m = req.mapping(b.name, b.id, b.load)
            for a in self.addrs[key]:
                req.location(m, a, key, a)
        msg = self.send(sink, port, req)
        checked, inlined = self.check_against_oracle(msg, req)
        self.assertGreater(checked, 100)
        self.assertGreater(inlined, 20, "the programs have inlined frames at many addresses")
        names = {n for li in req.where for n, _, _ in lines_of(msg, li)}
        for n in ("mix", "step", "crunch", "shared_hash", "fold", "rot",
                  "shop::price(shop::Cart<long> const&, int)", "shop::Cart<int>::total() const"):
            self.assertIn(n, names)
        if "rust" in self.bins:  # demangled as addr2line -C does: no hash, $LT$ decoded
            self.assertIn("prog::shop::Cart<u64>::total", names)
            self.assertIn("prog::shop::price", names)
            # v0 names carry the generic arguments, as addr2line -C prints them
            self.assertIn("<prog::shop::Cart<u64>>::total", names)
            self.assertIn("prog::shop::price::<u32>", names)
        else:
            print("skipped: the Rust program (no rustc)")
        # the strings are shared: each function name is once in the string table
        st = list(msg.dictionary.string_table)
        self.assertEqual(len(st), len(set(st)))
        resolved = ss.self_metric(mport, "profcol_processor_symbolizer_locations_resolved")
        self.assertEqual(resolved, checked)
        # the same request again: answered from the cache, the same lines
        msg2 = self.send(sink, port, req, 1)
        self.check_against_oracle(msg2, req)
        self.assertGreaterEqual(ss.self_metric(mport, "profcol_processor_symbolizer_cache_hits"),
                                len(req.where))
        pc.stop()

    def test_runtime_addresses_equal_addr2line(self):
        """A mapping loaded at BIAS with runtime addresses (as a Go pprof would say them): the
        executable's PT_LOAD headers place them (prog: elf_files; progxx: the directory)."""
        sink, port, mport, pc = self.start()
        req = Request()
        for key in ("prog", "progxx"):
            b = self.bins[key]
            m = req.mapping(b.name, b.id, b.load, bias=BIAS)
            for a in self.addrs[key][::3]:
                req.location(m, BIAS + a, key, a)
        msg = self.send(sink, port, req)
        checked, _ = self.check_against_oracle(msg, req)
        self.assertGreater(checked, 30)
        pc.stop()

    def test_pprof_upload(self):
        """A pprof (Pyroscope /ingest) with runtime addresses, a mapping with its build_id and no
        functions: the pyroscope receiver's batch is symbolized like the eBPF profiler's."""
        import pyro_support as ps
        sink, port, mport, pc = self.start(receiver="pyroscope")
        b = self.bins["progxx"]
        p = ps.ppb.Profile()
        p.string_table.extend(["", "cpu", "nanoseconds", b.name, b.id])
        p.sample_type.add(type=1, unit=2)
        off, vaddr, _, memsz = b.load
        start = BIAS + (vaddr & ~0xFFF)
        p.mapping.add(id=1, memory_start=start, memory_limit=start + memsz + 0x1000,
                      file_offset=off & ~0xFFF, filename=3, build_id=4)
        addrs = self.addrs["progxx"][::2]
        for i, a in enumerate(addrs):
            p.location.add(id=i + 1, mapping_id=1, address=BIAS + a)
            p.sample.add(location_id=[i + 1], value=[10])
        r = h.post(port, p.SerializeToString(), "application/octet-stream",
                   path="/ingest?name=symbolizer-pprof&format=pprof")
        self.assertEqual(r.status, 200, r.body[:300])
        sink.wait_requests(1, timeout=30)
        msg = sink.messages()[0]
        seen = 0
        for li, loc in enumerate(msg.dictionary.location_table):
            if li == 0:
                continue
            a = loc.address - BIAS
            want = self.oracle["progxx"][a]
            self.assertEqual(binutils_names(lines_of(msg, li), want, self.symbols["progxx"], a),
                             want, "pprof 0x%x" % a)
            seen += 1
        self.assertEqual(seen, len(addrs))
        pc.stop()

    def test_htlhash_and_go_build_id(self):
        """Mappings with no GNU build id: only an htlhash (upper case, as semconv's example; the
        profiler sends lower case) or only a Go build id (`go tool buildid`). The files are found
        in an elf_files directory, indexed at start by both; every line equals addr2line's."""
        d = os.path.join(self.tmp, "byhash")
        os.makedirs(d, exist_ok=True)
        progxx = shutil.copy(self.bins["progxx"].full, d)
        with open(os.path.join(d, "notelf.txt"), "w") as f:
            f.write("not an ELF file: skipped")
        keys = ["progxx"]
        goprog = build_go(self.tmp, os.path.join(HERE, "prog.go"), os.path.join(d, "progo"))
        sink, port, mport, pc = self.start(elf_files=[d])
        req = Request()
        m = req.mapping("progxx", None, self.bins["progxx"].load,
                        ids={"process.executable.build_id.htlhash": htlhash(progxx).upper()})
        for a in self.addrs["progxx"][::2]:
            req.location(m, a, "progxx", a)
        oracle = {"progxx": self.oracle["progxx"]}
        if goprog:
            goid = run(["go", "tool", "buildid", goprog], env=go_env(self.tmp)).strip()
            addrs = text_addresses(goprog, lambda s: s.startswith("main."))
            oracle["go"] = go_addr2line(self.tmp, goprog, addrs)
            m = req.mapping("progo", None, exec_load(goprog),
                            ids={"process.executable.build_id.go": goid})
            for a in addrs:
                req.location(m, a, "go", a)
            keys.append("go")
        else:
            print("skipped: the Go program (no go)")
        msg = self.send(sink, port, req)
        seen = set()
        for li, (key, a) in req.where.items():
            want = oracle[key][a]
            got = lines_of(msg, li)
            if key == "go":
                self.assertTrue(go_matches(got, want), "go 0x%x: %s != %s" % (a, got, want))
            else:
                got = binutils_names(got, want, self.symbols["progxx"], a)
                self.assertEqual(got, want, "%s 0x%x" % (key, a))
            seen.add(key)
        self.assertEqual(seen, set(keys))
        self.assertEqual(ss.self_metric(mport, METRIC + "locations_resolved"), len(req.where))
        pc.stop()

    def test_go_pclntab_stripped(self):
        """Go binaries built with -ldflags='-s -w' (no symbol table, no DWARF, .gopclntab kept),
        an executable and a PIE, matched by their Go build ids: functions, files, lines and
        inline chains come from profcol's .gopclntab reader (the inline trees found through
        runtime.moduledata.gofunc: a word in the file, or in a PIE a relocation's addend).
        Oracles: `go tool addr2line` on the same stripped file (Go's own reader: the function
        not inlined and the innermost position) and, when installed, LLVM's `llvm-symbolizer
        --inlining` on the unstripped build of the same source (DWARF: the whole chain)."""
        if not shutil.which("go"):
            self.skipTest("skipped: go not installed")
        d = os.path.join(self.tmp, "gostrip")
        os.makedirs(d, exist_ok=True)
        src = os.path.join(HERE, "prog.go")
        req, elves, want, chains = Request(), [], {}, {}
        for kind, flags in (("exe", []), ("pie", ["-buildmode=pie"])):
            full = build_go(self.tmp, src, os.path.join(d, "progo-full-" + kind), *flags)
            stripped = build_go(self.tmp, src, os.path.join(self.tmp, "progo-" + kind),
                                "-ldflags=-s -w", *flags)
            sections = run(["readelf", "-SW", stripped])
            self.assertNotIn(".symtab", sections)
            self.assertNotIn(".debug_info", sections)
            self.assertIn(".gopclntab", sections)
            # the addresses from the unstripped build of the same source (-s -w moves no code;
            # the oracle below reads the stripped file and would name other functions if it did)
            addrs = text_addresses(full, lambda s: s.startswith("main.") or s in (
                "runtime.mallocgc", "fmt.Fprintln", "runtime.main"))
            self.assertGreater(len(addrs), 100)
            want[kind] = go_addr2line(self.tmp, stripped, addrs)
            # the inline chains: LLVM's DWARF reader on the unstripped build
            chains[kind] = llvm_symbolizer(full, addrs)
            goid = run(["go", "tool", "buildid", stripped], env=go_env(self.tmp)).strip()
            m = req.mapping("progo-" + kind, None, exec_load(stripped),
                            ids={"process.executable.build_id.go": goid})
            for a in addrs:
                req.location(m, a, kind, a)
            elves.append(stripped)
        sink, port, mport, pc = self.start(elf_files=elves)
        msg = self.send(sink, port, req)
        names, inlined = set(), {"exe": 0, "pie": 0}
        for li, (kind, a) in req.where.items():
            got = lines_of(msg, li)
            self.assertTrue(go_matches(got, want[kind][a]),
                            "%s 0x%x: %s != %s" % (kind, a, got, want[kind][a]))
            names.add(got[-1][0])
            if chains[kind] is not None:
                self.assertEqual(got, chains[kind][a], "%s 0x%x" % (kind, a))
                inlined[kind] += len(got) > 1
        self.assertTrue({"main.crunch", "main.(*cart).total", "main.main"} <= names, names)
        if chains["exe"] is None:
            print("skipped: the inline chains (no llvm-symbolizer, Debian package llvm)")
        else:  # main.mix inlined into crunch and total, the runtime's many small helpers
            self.assertGreater(min(inlined.values()), 20, inlined)
        pc.stop()

    def test_symbol_table_fallback(self):
        """No DWARF anywhere (built without -g, given in elf_files, matched by build id): the
        function names are addr2line's from the symbol table, with no file or line."""
        sink, port, mport, pc = self.start(elf_files=[self.nodebug])
        addrs = text_addresses(self.nodebug, lambda s: s in ("crunch", "main"))
        want = addr2line(self.nodebug, addrs)
        req = Request()
        m = req.mapping("prog-nodebug", build_id(self.nodebug), exec_load(self.nodebug))
        for a in addrs:
            req.location(m, a, "nodebug", a)
        msg = self.send(sink, port, req)
        for li, (_, a) in req.where.items():
            self.assertEqual([(n, f) for n, f, _ in lines_of(msg, li)],
                             [(want[a][0][0], "")], "0x%x" % a)
        pc.stop()

    def test_unresolved_counted_with_fallback_names(self):
        """Hostile and unknown build ids and a file name nobody has stay unresolved, counted by
        reason; fallback_name gives them binary+0xoffset."""
        sink, port, mport, pc = self.start(extra="    fallback_name: true\n")
        req = Request()
        load = (0x1000, 0x1000, 0x100, 0x100)
        hostile = ["../../../../etc/passwd", "ab/../cd", "xyz", "a", "0" * 2000, "%2e%2e"]
        for i, bid in enumerate(hostile):
            req.location(req.mapping("evil%d" % i, bid, load), 0x1010, "x", 0)
        unknown = req.location(req.mapping("libnothere.so", "ab" * 20, load), 0x1020, "x", 0)
        noname = req.location(req.mapping("nobody.so", None, load), 0x1030, "x", 0)
        msg = self.send(sink, port, req)
        self.assertEqual(lines_of(msg, unknown), [("libnothere.so+0x1020", "", 0)])
        self.assertEqual(lines_of(msg, noname), [("nobody.so+0x1030", "", 0)])
        self.assertEqual(lines_of(msg, 1), [("evil0+0x1010", "", 0)])
        metric = "profcol_processor_symbolizer_locations_unresolved"
        self.assertEqual(ss.self_metric(mport, metric, reason="bad_build_id"), len(hostile))
        self.assertEqual(ss.self_metric(mport, metric, reason="no_file"), 2)
        pc.stop()


class Debuginfod:
    """elfutils' real debuginfod (Debian package debuginfod) on a loopback port, scanning (-F) a
    directory of the test's debug files, its database in memory."""

    def __init__(self, tmp, files):
        self.dir = tempfile.mkdtemp(prefix="srv-", dir=tmp)
        for f in files:
            shutil.copy(f, self.dir)
        self.port = h.free_port()
        self.log = open(os.path.join(tmp, "debuginfod-%d.log" % self.port), "w")
        self.proc = subprocess.Popen(["debuginfod", "-F", "-p", str(self.port), "-d", ":memory:",
                                      "-t", "0", self.dir], stdout=self.log, stderr=self.log)
        self.url = "http://127.0.0.1:%d" % self.port

    def wait_serves(self, build_id, timeout=60):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen("%s/buildid/%s/debuginfo" % (self.url, build_id),
                                            timeout=5) as r:
                    if r.status == 200:
                        return
            except (urllib.error.URLError, ConnectionError):
                pass
            time.sleep(0.3)
        raise AssertionError("debuginfod did not serve %s within %ds" % (build_id, timeout))

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()


class SlowGarbage(h.QuietHandler):
    """A server that answers every build id after SLOW seconds with a truncated ELF."""
    SLOW = 3.0

    def do_GET(self):
        time.sleep(self.SLOW)
        self.reply(200, "application/octet-stream", b"\x7fELF\x02\x01\x01" + b"\0" * 9 + b"junk")


class SlowDebug(h.QuietHandler):
    """Serves one debug file for its build id after 2 s (404 for anything else), counting the
    requests."""
    body, build_id, requests = b"", "", []

    def do_GET(self):
        type(self).requests.append(self.path)
        time.sleep(2)
        if self.path == "/buildid/%s/debuginfo" % self.build_id:
            self.reply(200, "application/octet-stream", self.body)
        else:
            self.reply(404, "text/plain", b"not found")


METRIC = "profcol_processor_symbolizer_"


class DebuginfodTest(Programs):
    """The same programs, their debug files only on debuginfod servers (no local source)."""

    def start_with(self, urls, extra=""):
        cache = tempfile.mkdtemp(prefix="cache-", dir=self.tmp)
        extra = ("    debuginfod:\n      urls: [%s]\n      cache_dir: %s\n" % (", ".join(urls), cache)
                 + extra)
        sink = h.Sink().start()
        self.addCleanup(sink.stop)
        port, mport = h.free_port(), h.free_port()
        pc = h.Profcol(config(port, mport, sink.url, None, [], extra),
                       wait_ports=[port, mport], name="symbolizer-debuginfod").start()
        self.addCleanup(pc.kill)
        return sink, port, mport, pc

    def metric(self, mport, name, **labels):
        return ss.self_metric(mport, METRIC + name, **labels) or 0

    def test_real_debuginfod_equals_addr2line(self):
        """Debug files and executables on the server (`debuginfod.executables`): ELF addresses
        and runtime addresses (placed by the fetched executable's program headers)."""
        if not shutil.which("debuginfod"):
            self.skipTest("skipped: debuginfod (Debian package debuginfod) not installed")
        served = [b.debug for b in self.bins.values()]
        for b in self.bins.values():
            # rustc's allocated .debug_gdb_scripts section makes debuginfod take the executable
            # for a debug file too (and serve it as one): the served copy goes without it
            exe = os.path.join(self.tmp, "served-" + b.name)
            run(["objcopy", "--remove-section=.debug_gdb_scripts", b.stripped, exe])
            served.append(exe)
        srv = Debuginfod(self.tmp, served)
        self.addCleanup(srv.stop)
        for b in self.bins.values():
            srv.wait_serves(b.id)
        sink, port, mport, pc = self.start_with([srv.url],
                                                "      wait: 30s\n      executables: true\n")
        req = Request()
        for key, b in self.bins.items():
            m = req.mapping(b.name, b.id, b.load)
            for a in self.addrs[key][::2]:
                req.location(m, a, key, a)
            if key != "lib":
                m = req.mapping(b.name, b.id, b.load, bias=BIAS)
                for a in self.addrs[key][1::4]:
                    req.location(m, BIAS + a, key, a)
        msg = self.send(sink, port, req)
        checked, inlined = self.check_against_oracle(msg, req)
        self.assertGreater(checked, 80)
        self.assertGreater(inlined, 10)
        # one fetch per build id, however many locations and requests
        self.send(sink, port, req, 1)
        self.assertEqual(self.metric(mport, "fetches"), len(self.bins))
        self.assertEqual(self.metric(mport, "fetches_found"), len(self.bins))
        self.assertEqual(self.metric(mport, "fetch_duration_seconds_count"), len(self.bins))
        size = sum(os.path.getsize(f) for f in served)
        self.assertEqual(self.metric(mport, "fetched_bytes"), size)
        # a build id the server does not have: 404, counted, not asked again
        req = Request()
        unknown = req.location(req.mapping("libgone.so", "cd" * 20, self.bins["lib"].load),
                               self.addrs["lib"][0], "x", 0)
        msg = self.send(sink, port, req, 2)
        self.assertEqual(lines_of(msg, unknown), [])
        self.send(sink, port, req, 3)
        self.assertEqual(self.metric(mport, "fetches_not_found"), 1)
        self.assertEqual(self.metric(mport, "locations_unresolved", reason="no_file"), 2)
        pc.stop()

    def test_server_down_opens_the_breaker(self):
        down = "http://127.0.0.1:%d" % h.free_port()
        sink, port, mport, pc = self.start_with([down], "      breaker_failures: 2\n")
        req = Request()
        locs = [req.location(req.mapping("lib%d.so" % i, "%02x" % i * 20, self.bins["lib"].load),
                             self.addrs["lib"][0], "x", 0) for i in range(4)]
        t0 = time.monotonic()
        msg = self.send(sink, port, req)
        self.assertLess(time.monotonic() - t0, 10)
        for li in locs:
            self.assertEqual(lines_of(msg, li), [])
        self.assertEqual(self.metric(mport, "locations_unresolved", reason="fetch_error"), 4)
        self.assertEqual(self.metric(mport, "fetch_errors"), 2, "the breaker stops the rest")
        self.assertEqual(self.metric(mport, "breakers_open"), 1)
        pc.stop()

    def test_slow_server_then_garbage(self):
        slow = h.LocalServer(SlowGarbage).start()
        self.addCleanup(slow.stop)
        sink, port, mport, pc = self.start_with([slow.url], "      wait: 1s\n")
        b = self.bins["prog"]
        req = Request()
        li = req.location(req.mapping(b.name, b.id, b.load), self.addrs["prog"][0], "x", 0)
        t0 = time.monotonic()
        msg = self.send(sink, port, req)
        self.assertLess(time.monotonic() - t0, SlowGarbage.SLOW, "the batch waited 1 s, not 3")
        self.assertEqual(lines_of(msg, li), [])
        self.assertEqual(self.metric(mport, "locations_unresolved", reason="fetch_wait"), 1)
        time.sleep(SlowGarbage.SLOW + 1)
        msg = self.send(sink, port, req, 1)
        self.assertEqual(lines_of(msg, li), [])
        self.assertEqual(self.metric(mport, "locations_unresolved", reason="bad_file"), 1)
        self.assertEqual(self.metric(mport, "fetches"), 1)
        pc.stop()

    def test_one_fetch_for_concurrent_batches(self):
        """Four requests needing the same build id at once: one request reaches the server, every
        batch waits for that fetch and is symbolized as addr2line says."""
        b = self.bins["prog"]
        with open(b.debug, "rb") as f:
            SlowDebug.body = f.read()
        SlowDebug.build_id, SlowDebug.requests = b.id, []
        srv = h.LocalServer(SlowDebug).start()
        self.addCleanup(srv.stop)
        sink, port, mport, pc = self.start_with([srv.url], "      wait: 20s\n")
        req = Request()
        m = req.mapping(b.name, b.id, b.load)
        for a in self.addrs["prog"][::5]:
            req.location(m, a, "prog", a)
        statuses = []
        threads = [threading.Thread(target=lambda: statuses.append(h.post(port, req.body()).status))
                   for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        self.assertEqual(statuses, [200] * 4)
        sink.wait_requests(4, timeout=30)
        for msg in sink.messages():
            self.assertGreater(self.check_against_oracle(msg, req)[0], 10)
        self.assertEqual(SlowDebug.requests, ["/buildid/%s/debuginfo" % b.id])
        self.assertEqual(self.metric(mport, "fetches"), 1)
        pc.stop()

    def test_timeout_shorter_than_the_server(self):
        """timeout 1 s against a server that answers after 3 s: the request is aborted (counted
        as an error) well before the server answers, inside a wait of 10 s."""
        slow = h.LocalServer(SlowGarbage).start()
        self.addCleanup(slow.stop)
        sink, port, mport, pc = self.start_with([slow.url], "      timeout: 1s\n      wait: 10s\n")
        b = self.bins["prog"]
        req = Request()
        li = req.location(req.mapping(b.name, b.id, b.load), self.addrs["prog"][0], "x", 0)
        t0 = time.monotonic()
        msg = self.send(sink, port, req)
        self.assertLess(time.monotonic() - t0, SlowGarbage.SLOW)
        self.assertEqual(lines_of(msg, li), [])
        self.assertEqual(self.metric(mport, "locations_unresolved", reason="fetch_error"), 1)
        self.assertEqual(self.metric(mport, "fetch_errors"), 1)
        pc.stop()


def write_seeds(d):
    """The fuzz_symbolizer seed corpus: eBPF-shaped requests whose mappings name the fuzz
    executable by file name ("exe", its elf_files entry), by build ids nobody has, by hostile
    ids, and a zero mapping (addresses already the ELF's)."""
    os.makedirs(d, exist_ok=True)
    load = (0x1000, 0x1000, 0x4000000, 0x4000000)
    seeds = {}
    req = Request()
    m = req.mapping("exe", None, load)
    for a in range(0x1000, 0x1000 + 256 * 0x4001, 0x4001):  # over 4 MiB: the text is in there
        req.location(m, a, "x", 0)
    seeds["by_name"] = req.body()
    req = Request()
    for i, bid in enumerate(["ab" * 20, "../../etc/passwd", "AB" * 8, "x"]):
        req.location(req.mapping("lib%d.so" % i, bid, load), 0x1010 + i, "x", 0)
    for i, (key, bid) in enumerate([("htlhash", "AB" * 16), ("htlhash", "../" * 11),
                                     ("go", "abc/def"), ("go", "../../etc passwd")]):
        m = req.mapping("go%d" % i, None, load, ids={"process.executable.build_id." + key: bid})
        req.location(m, 0x2000 + i, "x", 0)
    req.d.mapping_table.add()  # a mapping of zeros
    req.location(len(req.d.mapping_table) - 1, 0x1234, "x", 0)
    seeds["ids"] = req.body()
    req = Request()
    m = req.mapping("exe", None, load, bias=BIAS)
    for a in range(0x3000, 0x3000 + 16 * 0x111, 0x111):
        req.location(m, BIAS + a, "x", 0)
    seeds["runtime"] = req.body()
    for name, data in seeds.items():
        with open(os.path.join(d, name), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    h.main(write_seeds)
