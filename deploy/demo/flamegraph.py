#!/usr/bin/python3
"""Flame graphs from recorded OTLP profiles (JSON), as one self-contained HTML file.

    flamegraph.py --out flamegraph.html DIR_OR_FILE...

Reads ExportProfilesServiceRequest bodies in OTLP JSON (what profcol's otlphttp exporter sends
with `encoding: json`, recorded by recorder.py), resolves every sample's stack through the
request's ProfilesDictionary (stack -> locations -> lines -> functions -> strings), sums the
values per (service.name, sample type) and draws one flame graph (inline SVG, root at the
bottom, hover for values, click a frame to zoom, click the root to reset) per group, CPU first.
Python 3 standard library only.
"""
import argparse
import glob
import html
import json
import os
import sys
import zlib

WIDTH = 1200
ROW = 17
FONT_PX = 11
CHAR_PX = 6.6


def as_int(v):
    return int(v) if v not in (None, '') else 0


def resolve_requests(paths):
    """Yields (service, sample type 'type/unit', [root..leaf function names], value)."""
    files = []
    for p in paths:
        files += sorted(glob.glob(os.path.join(p, '*.json'))) if os.path.isdir(p) else [p]
    for path in files:
        with open(path) as f:
            req = json.load(f)
        d = req.get('dictionary') or {}
        strings = d.get('stringTable') or ['']
        functions = d.get('functionTable') or [{}]
        locations = d.get('locationTable') or [{}]
        stacks = d.get('stackTable') or [{}]

        def s(i):
            return strings[as_int(i)] if 0 <= as_int(i) < len(strings) else '?'

        def frames(stack_index):
            st = stacks[as_int(stack_index)] if as_int(stack_index) < len(stacks) else {}
            out = []
            # location_indices are leaf first; a location's lines are callee first (inlined
            # functions precede the function they were inlined into): reverse both for root first
            for li in reversed(st.get('locationIndices') or []):
                loc = locations[as_int(li)] if as_int(li) < len(locations) else {}
                lines = loc.get('lines') or []
                if not lines:
                    out.append('0x%x' % as_int(loc.get('address')))
                for line in reversed(lines):
                    fi = as_int(line.get('functionIndex'))
                    fn = functions[fi] if fi < len(functions) else {}
                    out.append(s(fn.get('nameStrindex')) or '?')
            return out

        for rp in req.get('resourceProfiles') or []:
            service = 'unknown_service'
            for kv in (rp.get('resource') or {}).get('attributes') or []:
                if kv.get('key') == 'service.name':
                    service = (kv.get('value') or {}).get('stringValue', service)
            for sp in rp.get('scopeProfiles') or []:
                for prof in sp.get('profiles') or []:
                    st = prof.get('sampleType') or {}
                    stype = '%s/%s' % (s(st.get('typeStrindex')), s(st.get('unitStrindex')))
                    for sample in prof.get('samples') or []:
                        values = sample.get('values') or []
                        value = as_int(values[0]) if values else \
                            len(sample.get('timestampsUnixNano') or [])
                        if value > 0:
                            yield service, stype, frames(sample.get('stackIndex')), value


def build_trees(samples):
    trees = {}
    for service, stype, stack, value in samples:
        node = trees.setdefault((service, stype), {'name': 'all', 'value': 0, 'kids': {}})
        node['value'] += value
        for name in stack:
            node = node['kids'].setdefault(name, {'name': name, 'value': 0, 'kids': {}})
            node['value'] += value
    return trees


def depth(node):
    return 1 + max((depth(k) for k in node['kids'].values()), default=0)


def color(name):
    h = zlib.crc32(name.encode())
    if name.startswith('runtime.') or name.startswith('node:') or name == 'all':
        return 'rgb(%d,%d,%d)' % (200 + h % 40, 120 + h % 60, 60)  # runtime: orange
    return 'rgb(%d,%d,%d)' % (220 + h % 35, 60 + (h >> 8) % 130, 40 + (h >> 16) % 40)


def fmt_value(v, unit):
    if unit == 'nanoseconds':
        for div, u in ((1e9, 's'), (1e6, 'ms'), (1e3, 'µs')):
            if v >= div:
                return '%.2f %s' % (v / div, u)
        return '%d ns' % v
    if unit == 'bytes':
        for div, u in ((1 << 30, 'GiB'), (1 << 20, 'MiB'), (1 << 10, 'KiB')):
            if v >= div:
                return '%.2f %s' % (v / div, u)
        return '%d B' % v
    return '%d %s' % (v, unit)


def svg(tree, unit, gid):
    rows = depth(tree)
    height = rows * ROW + 4
    total = tree['value'] or 1
    out = ['<svg id="%s" class="fg" width="%d" height="%d" viewBox="0 0 %d %d" '
           'xmlns="http://www.w3.org/2000/svg" font-family="monospace" font-size="%d">'
           % (gid, WIDTH, height, WIDTH, height, FONT_PX)]

    def walk(node, x, level, path):
        w = node['value'] * WIDTH / total
        y = height - (level + 1) * ROW
        label = node['name']
        fits = int((w - 6) / CHAR_PX)
        text = label if len(label) <= fits else (label[:fits - 2] + '..' if fits > 3 else '')
        tip = '%s: %s (%.2f%%)' % (label, fmt_value(node['value'], unit),
                                   100.0 * node['value'] / total)
        out.append('<g class="f" data-x="%.3f" data-w="%.3f" data-l="%d" data-p="%s">'
                   '<title>%s</title><rect x="%.2f" y="%d" width="%.2f" height="%d" rx="2" '
                   'fill="%s"/><text x="%.2f" y="%d">%s</text></g>'
                   % (x, w, level, path, html.escape(tip), x, y,
                      max(w - 0.5, 0.1), ROW - 1, color(label), x + 3, y + ROW - 5,
                      html.escape(text)))
        for i, kid in enumerate(sorted(node['kids'].values(), key=lambda k: k['name'])):
            walk(kid, x, level + 1, '%s.%d' % (path, i))
            x += kid['value'] * WIDTH / total

    walk(tree, 0.0, 0, '0')
    out.append('</svg>')
    return '\n'.join(out)


SCRIPT = r'''
// click a frame: it fills the width and its ancestors stay; click the bottom frame to reset
document.querySelectorAll('svg.fg').forEach(function (svg) {
  var W = %d, CH = %g;
  var gs = Array.prototype.slice.call(svg.querySelectorAll('g.f'));
  function label(g, w) {
    var t = g.querySelector('text'), name = g.querySelector('title').textContent;
    name = name.slice(0, name.lastIndexOf(': '));
    var fits = Math.floor((w - 6) / CH);
    t.textContent = name.length <= fits ? name : (fits > 3 ? name.slice(0, fits - 2) + '..' : '');
  }
  function zoom(target) {
    var x0 = +target.dataset.x, w0 = +target.dataset.w, p = target.dataset.p;
    gs.forEach(function (g) {
      var x = +g.dataset.x, w = +g.dataset.w, gp = g.dataset.p;
      var inside = gp === p || gp.indexOf(p + '.') === 0;
      var above = p.indexOf(gp + '.') === 0;
      var nx = inside ? (x - x0) * W / w0 : 0, nw = inside ? w * W / w0 : (above ? W : 0);
      g.style.display = nw < 0.1 ? 'none' : '';
      var r = g.querySelector('rect'), t = g.querySelector('text');
      r.setAttribute('x', nx); r.setAttribute('width', Math.max(nw - 0.5, 0.1));
      t.setAttribute('x', nx + 3); label(g, nw);
    });
  }
  gs.forEach(function (g) { g.addEventListener('click', function () { zoom(g); }); });
});
''' % (WIDTH, CHAR_PX)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('inputs', nargs='+', help='directories of *.json bodies, or files')
    ap.add_argument('--out', required=True, help='HTML file to write')
    ap.add_argument('--title', default='profcol demo: profiles that went through profcol')
    args = ap.parse_args()
    trees = build_trees(resolve_requests(args.inputs))
    if not trees:
        print('flamegraph: no samples found in %s' % ' '.join(args.inputs), file=sys.stderr)
        return 1

    def order(key):
        service, stype = key
        return (0 if stype.startswith('cpu/') else 1 if 'nanoseconds' in stype else 2,
                service, stype)

    parts = ['<!DOCTYPE html><html><head><meta charset="utf-8"><title>%s</title><style>'
             'body{font-family:sans-serif;margin:1em}svg.fg g.f{cursor:pointer}'
             'svg.fg text{pointer-events:none;fill:#000}svg.fg g.f:hover rect{stroke:#000;'
             'stroke-width:.6}h2{font-size:1.05em;margin:1.4em 0 .3em}</style></head><body>'
             '<h1 style="font-size:1.3em">%s</h1>' % (html.escape(args.title),
                                                      html.escape(args.title))]
    for i, key in enumerate(sorted(trees, key=order)):
        service, stype = key
        tree = trees[key]
        unit = stype.split('/', 1)[1] if '/' in stype else ''
        parts.append('<h2>%s &mdash; %s &mdash; total %s</h2>'
                     % (html.escape(service), html.escape(stype),
                        html.escape(fmt_value(tree['value'], unit))))
        parts.append(svg(tree, unit, 'fg%d' % i))
        print('flamegraph: %s %s total %s' % (service, stype, fmt_value(tree['value'], unit)),
              file=sys.stderr)
    parts.append('<script>%s</script></body></html>\n' % SCRIPT)
    with open(args.out + '.tmp', 'w') as f:
        f.write('\n'.join(parts))
    os.rename(args.out + '.tmp', args.out)
    return 0


if __name__ == '__main__':
    sys.exit(main())
