#!/usr/bin/env python3
"""Writes fuzz_gopclntab's seeds into DIR (default tests/fuzz/corpus/fuzz_gopclntab): small
.gopclntab sections laid out as Go 1.18 and 1.20+ write them (runtime/symtab.go's pcHeader and
_func; ../shared/spec/symbolization.md §5), three functions each with file and line streams.
In the 1.20+ one, main.crunch has an inline tree (PCDATA_InlTreeIndex, FUNCDATA_InlTree): one
inlinedCall of runtime.x in its first half, right after the header, where fuzz_gopclntab's
gofunc (the section's start, as the file ends with a 0 byte) puts offset 72.
A real section is 600 KB, too big for a seed; the fuzzer grows these."""
import os
import struct
import sys


def uvarint(v):
    out = bytearray()
    while v >= 0x80:
        out.append(v & 0x7F | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def pcvalue(pairs):
    """[(value, pc length)] as a pcvalue stream: zig-zag value deltas from -1, pc deltas."""
    out, prev = bytearray(), -1
    for val, length in pairs:
        d = val - prev
        out += uvarint((d << 1) if d >= 0 else ((-d - 1) << 1) | 1) + uvarint(length)
        prev = val
    return bytes(out + b"\0")


def table(magic, v120):
    funcs = [("main.main", 0x0, 0x40), ("main.crunch", 0x40, 0x30), ("runtime.x", 0x70, 0x10)]
    names = b"".join(n.encode() + b"\0" for n, _, _ in funcs)
    files = b"/src/prog.go\0/go/src/runtime/x.go\0"
    cutab = struct.pack("<2I", 0, len(b"/src/prog.go\0"))
    pctab = bytearray(b"\0")
    streams = []
    for i, (_, _, size) in enumerate(funcs):
        f_off = len(pctab)
        pctab += pcvalue([(0 if i < 2 else 1, size)])
        l_off = len(pctab)
        pctab += pcvalue([(10 + i, size // 2), (12 + i, size - size // 2)])
        streams.append((f_off, l_off))
    hdr_len = 8 + 8 * 8
    inl_stream = len(pctab)
    pctab += pcvalue([(0, 0x18), (-1, 0x18)])  # crunch's first half: inlined call 0
    inl_tree = b""
    if v120:  # funcID, 3 pad, nameOff (runtime.x), parentPc (in the second half), startLine
        inl_tree = struct.pack("<B3xiii", 0, names.index(b"runtime.x"), 0x20, 3)
    off_names = hdr_len + len(inl_tree)
    off_cu = off_names + len(names)
    off_files = off_cu + len(cutab)
    off_pc = off_files + len(files)
    off_ftab = off_pc + len(pctab)
    ftab = bytearray()
    body = bytearray()
    base = (len(funcs) + 1) * 8
    name_off = 0
    for i, (name, entry, size) in enumerate(funcs):
        ftab += struct.pack("<II", entry, base + len(body))
        f_off, l_off = streams[i]
        inl = v120 and name == "main.crunch"
        body += struct.pack("<IiiIIIIII", entry, name_off, 0, 0, 0, f_off, l_off, 3 if inl else 0,
                            0)
        if v120:
            body += struct.pack("<i", 5 + i)
        body += bytes([0, 0, 0, 4 if inl else 0])  # funcID, flag, pad, nfuncdata
        if inl:  # pcdata[3] (pctab offsets), funcdata[4] (offsets from gofunc; [3] the tree)
            body += struct.pack("<3I", 0, 0, inl_stream) + struct.pack(
                "<4I", 0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF, hdr_len)
        name_off += len(name) + 1
    ftab += struct.pack("<II", funcs[-1][1] + funcs[-1][2], 0)
    hdr = struct.pack("<IBBBB", magic, 0, 0, 1, 8) + struct.pack(
        "<8Q", len(funcs), 2, 0x401000, off_names, off_cu, off_files, off_pc, off_ftab)
    return hdr + inl_tree + names + cutab + files + bytes(pctab) + bytes(ftab) + bytes(body) + b"\0"


def main():
    d = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "corpus", "fuzz_gopclntab")
    os.makedirs(d, exist_ok=True)
    for name, data in (("go120", table(0xFFFFFFF1, True)), ("go118", table(0xFFFFFFF0, False))):
        with open(os.path.join(d, name), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main()
