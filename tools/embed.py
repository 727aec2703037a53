#!/usr/bin/env python3
"""Embed a text file as a NUL-terminated C string (the default config, the profilez page)."""
import sys

src, dst, name = sys.argv[1], sys.argv[2], sys.argv[3]
data = open(src, 'rb').read()
with open(dst, 'w') as f:
    f.write('/* generated from %s by tools/embed.py */\n' % src.split('/')[-1])
    f.write('const char %s[] = {\n' % name)
    for i in range(0, len(data), 16):
        f.write('  ' + ', '.join('0x%02x' % b for b in data[i:i + 16]) + ',\n')
    f.write('  0x00 };\n')
