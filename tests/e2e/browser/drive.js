'use strict';
// Drives Debian's chromium (headless, never a downloaded browser) with playwright-core against
// profcol's profilez page and prints what it saw as one JSON line; tests/e2e/test_profilez.py
// decides what to do and checks the result. Usage: node drive.js PLAN.json
//
// PLAN: {"url": "http://127.0.0.1:PORT/", "userDataDir": fresh dir, "screenshot": path.png,
//        "series": [{"service", "type", "click": frame name, "hover": frame name,
//                    "search": term}],
//        "update": {"service", "type", "url": ingest URL, "file": pprof path, "total": N}}
// Per series it reports the names of the frames drawn, then clicks `click` and reports the zoom
// state the page exposes (#flame data-zoom, data-zoom-depth; the clicked frame's width), goes
// back, hovers `hover` (the tooltip's text), types `search` (data-matches, data-match-share, the
// highlighted frames). With "update" it posts the file once more while the page stays open and
// waits for the page (polling, no reload) to show the series' new total.
//
// Optional parts (each reported under its own key):
//   "defaults": {} the page as first opened (no hash): title, hash, listed series, top rows.
//   "view": {"service", "type", "click", "search"} zooms into `click`, types `search`, reads
//      the top table (it follows both) and the URL; then opens that URL in a fresh page and reads
//      the same, so the test can compare what the two draw.
//   "timeline": {"service", "type"} reads the timeline's bars, clicks the first bar with a value
//      (a range of that slice), reads the flame graph's root and the top table, then opens the URL
//      in a fresh page and reads them again.
//   "empty": URL of a page with no data: the lines it shows to send some.
//   "labels": {"url" (a view grouped by a key), "markupKey"} reads the groups table, follows the
//      link of its first value (a label filter), reads the flame graph's root, the top table and
//      the filter chips, opens that URL in a fresh page and reads them again; then groups by
//      markupKey and reads the values drawn and whether any markup came alive.
//   "diff": {"url" (a view filtered by one label), "key", "value"} sets that view as the
//      baseline, drops its filter, follows the groups table's link of key=value, and reads the
//      frames' changes and the diff's top table; then opens the URL in a fresh page and reads
//      them again.
//   "timeDiff": {"url" (a series' view)} clicks the timeline's first bar with a value, sets it
//      as the baseline, clicks the last bar with a value and reads the diff (as "diff" does), then
//      opens the URL in a fresh page and reads it again.
//   "apiDelayMs": N  every answer of the page's /api/ arrives N ms late (a slow server), so a
//      step taken while a view loads meets the page between its two states every time.
//   "shots": {"width", "height", "views": [{"file", "url", and what to wait for: "groups",
//      "diff" (true), "search", "zoom" (the data-zoom frame name); "scroll": a selector scrolled to the top}]} a PNG of each.
const fs = require('fs');
const { chromium } = require('playwright-core');

const CHROMIUM_ARGS = ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync'];

// page.evaluate, not $$eval: see diffState
async function frames(page) {
  return page.evaluate(() => Array.from(document.querySelectorAll('#flame .f')).map((d) => ({
    name: d.dataset.name, depth: +d.dataset.depth, total: +d.dataset.total,
    width: d.getBoundingClientRect().width, anc: d.classList.contains('anc'),
    hit: d.classList.contains('hit') })));
}

async function flameState(page) {
  return page.$eval('#flame', (f) => ({ ...f.dataset, width: f.clientWidth }));
}

async function selectSeries(page, s) {
  const sel = 'nav button[data-service=' + JSON.stringify(s.service) + '][data-type=' +
    JSON.stringify(s.type) + ']';
  await page.locator(sel).click({ timeout: 30000 });
  await page.waitForFunction((want) => document.getElementById('title').textContent === want &&
    document.getElementById('flame').dataset.state === 'ready', s.service + ' · ' + s.type,
  { timeout: 30000 });
}

async function one(page, s) {
  const out = { service: s.service, type: s.type };
  await selectSeries(page, s);
  out.frames = await frames(page);
  out.initial = await flameState(page);
  out.top = await page.$$eval('#top tbody tr', (trs) => trs.map((t) => t.dataset.name));
  if (s.click) {
    const target = page.locator('#flame .f:not(.anc)[data-name=' + JSON.stringify(s.click) + ']').first();
    await target.click();
    out.zoomed = await flameState(page);
    out.zoomedFrames = await frames(page);
    await page.locator('#back').click();
    out.back = await flameState(page);
  }
  if (s.hover) {
    await page.locator('#flame .f:not(.anc)[data-name=' + JSON.stringify(s.hover) + ']').first().hover();
    await page.waitForSelector('#tip', { state: 'visible', timeout: 5000 });
    out.tip = await page.$eval('#tip', (t) => t.innerText);
    await page.mouse.move(0, 0);
  }
  if (s.search) {
    await page.fill('#search', s.search);
    out.searched = await flameState(page);
    out.searchedFrames = (await frames(page)).filter((f) => f.hit).map((f) => f.name);
    out.matchText = await page.$eval('#match', (m) => m.textContent);
    await page.fill('#search', '');
  }
  return out;
}

async function topRows(page) {
  return page.$$eval('#top tbody tr', (trs) => trs.map((t) => ({ name: t.dataset.name,
    flat: +t.dataset.flat, cum: +t.dataset.cum })));
}

// what a view draws: title, flame state, frames, top table, URL
async function viewState(page) {
  return { title: await page.$eval('#title', (t) => t.textContent), flame: await flameState(page),
    frames: (await frames(page)).map((f) => [f.name, f.depth, f.total, f.anc, f.hit]),
    top: await topRows(page), topState: await page.$eval('#top', (t) => ({ ...t.dataset })),
    url: page.url() };
}

async function view(ctx, page, v) {
  await selectSeries(page, v);
  await page.locator('#flame .f:not(.anc)[data-name=' + JSON.stringify(v.click) + ']').first().click();
  await page.waitForFunction((want) => document.getElementById('top').dataset.focus.endsWith(want),
    v.click, { timeout: 30000 });
  await page.fill('#search', v.search);
  await page.waitForFunction((want) => document.getElementById('top').dataset.search === want,
    v.search, { timeout: 30000 });
  const out = { first: await viewState(page) };
  const fresh = await ctx.newPage();
  await fresh.goto(out.first.url, { waitUntil: 'load', timeout: 30000 });
  await fresh.waitForFunction((want) => {
    const f = document.getElementById('flame'), t = document.getElementById('top');
    return f.dataset.state === 'ready' && f.dataset.zoom === want.click && t.dataset.search === want.search;
  }, v, { timeout: 30000, polling: 200 });
  out.second = await viewState(fresh);
  await fresh.close();
  await page.fill('#search', '');
  await page.locator('#reset').click();
  return out;
}

async function rootTotal(page) {
  return page.$eval('#flame .f[data-depth="0"]', (d) => +d.dataset.total);
}

async function timeline(ctx, page, v) {
  await selectSeries(page, v);
  await page.waitForSelector('#timeline .tb:not(.zero)', { timeout: 30000 });
  // no polling while bars are read and clicked: with 1 s slices they slide at every poll
  await page.uncheck('#live');
  await page.waitForTimeout(500); // a poll already under way lands
  const out = {};
  out.bars = await page.$$eval('#timeline .tb', (bs) => bs.map((b) => [+b.dataset.start, +b.dataset.total]));
  out.whole = await rootTotal(page);
  const i = out.bars.findIndex((b) => b[1] > 0);
  out.clicked = out.bars[i];
  await page.locator('#timeline .tb[data-start="' + out.bars[i][0] + '"]').click();
  await page.waitForFunction(() => !document.getElementById('range-clear').disabled &&
    location.hash.includes('from='), null, { timeout: 30000 });
  await page.waitForFunction((want) => {
    const d = document.querySelector('#flame .f[data-depth="0"]');
    return d && +d.dataset.total === want;
  }, out.clicked[1], { timeout: 30000, polling: 200 }).catch(() => {});
  out.first = { total: await rootTotal(page), top: await topRows(page), url: page.url(),
    inRange: await page.$$eval('#timeline .tb.in', (bs) => bs.map((b) => +b.dataset.start)) };
  const fresh = await ctx.newPage();
  await fresh.goto(out.first.url, { waitUntil: 'load', timeout: 30000 });
  await fresh.waitForFunction(() => document.getElementById('flame').dataset.state === 'ready' &&
    document.querySelectorAll('#top tbody tr').length > 0, null, { timeout: 30000, polling: 200 });
  out.second = { total: await rootTotal(fresh), top: await topRows(fresh), url: fresh.url() };
  await fresh.close();
  await page.locator('#range-clear').click();
  await page.waitForFunction(() => document.getElementById('range-clear').disabled &&
    !location.hash.includes('from='), null, { timeout: 30000 });
  await page.waitForTimeout(500); // the redraw after it lands
  // a drag from the first bar with a value to the last: the slices between them
  const nz = (await page.$$eval('#timeline .tb', (bs) => bs.map((b) => [+b.dataset.start, +b.dataset.total])))
    .filter((b) => b[1] > 0);
  const box = (b) => page.locator('#timeline .tb[data-start="' + b[0] + '"]').boundingBox();
  const a = await box(nz[0]), b = await box(nz[nz.length - 1]);
  await page.mouse.move(a.x + a.width / 2, a.y + a.height / 2);
  await page.mouse.down();
  await page.mouse.move(b.x + b.width / 2, b.y + b.height / 2, { steps: 5 });
  await page.mouse.up();
  await page.waitForFunction(() => location.hash.includes('from='), null, { timeout: 30000 });
  await page.waitForFunction((want) => {
    const d = document.querySelector('#flame .f[data-depth="0"]');
    return d && +d.dataset.total === want;
  }, nz.reduce((s, x) => s + x[1], 0), { timeout: 30000, polling: 200 }).catch(() => {});
  out.dragged = { bars: nz, total: await rootTotal(page),
    inRange: await page.$$eval('#timeline .tb.in', (bs) => bs.map((x) => +x.dataset.start)) };
  await page.check('#live');
  return out;
}

async function groups(page) {
  return page.$$eval('#groups tbody tr', (trs) => trs.map((t) => ({ value: t.dataset.value,
    none: t.dataset.none === '1', total: +t.dataset.total, text: t.cells[0].textContent })));
}

async function labels(ctx, page, v) {
  await page.goto(v.url, { waitUntil: 'load', timeout: 30000 });
  await page.waitForFunction(() => document.getElementById('flame').dataset.state === 'ready' &&
    document.querySelectorAll('#groups tbody tr').length > 0, null, { timeout: 30000, polling: 200 });
  const out = { groups: await groups(page), whole: await rootTotal(page) };
  const first = out.groups.find((g) => !g.none);
  await page.locator('#groups tbody tr td a').first().click();
  await page.waitForFunction((want) => {
    const d = document.querySelector('#flame .f[data-depth="0"]');
    return location.hash.includes('label=') && d && +d.dataset.total === want &&
      document.querySelectorAll('#filters button').length === 1;
  }, first.total, { timeout: 30000, polling: 200 }).catch(() => {});
  const state = async (p) => ({ total: await rootTotal(p), top: await topRows(p), url: p.url(),
    filters: await p.$$eval('#filters button', (bs) => bs.map((b) => [b.dataset.key, b.dataset.value])) });
  out.filtered = await state(page);
  const fresh = await ctx.newPage();
  await fresh.goto(out.filtered.url, { waitUntil: 'load', timeout: 30000 });
  await fresh.waitForFunction(() => document.getElementById('flame').dataset.state === 'ready' &&
    document.querySelectorAll('#top tbody tr').length > 0, null, { timeout: 30000, polling: 200 });
  out.fresh = await state(fresh);
  await fresh.close();
  await page.selectOption('#group-by', v.markupKey);
  await page.waitForFunction((k) => document.getElementById('groups-key').textContent === k &&
    document.querySelectorAll('#groups tbody tr').length > 0, v.markupKey, { timeout: 30000, polling: 200 });
  out.markup = { groups: await groups(page), imgs: await page.$$eval('img', (i) => i.length),
    pwned: await page.evaluate(() => window.__pz_pwned === 1) };
  return out;
}

// One evaluate, not one $$eval a part: $$eval queries in one round trip and reads in another,
// so a live poll that redraws between them hands it detached elements (whose computed colour
// is ""). One task of the page's JS sees one drawing.
async function diffState(p) {
  const st = await p.evaluate(() => {
    const fs = Array.from(document.querySelectorAll('#flame .f'));
    return {
      frames: fs.map((d) => [d.dataset.name, +d.dataset.depth, +d.dataset.total,
        d.dataset.change === undefined ? null : +d.dataset.change]),
      // the colour drawn, as the browser computed it: "rgb(r, g, b)"
      colors: fs.map((d) => [d.dataset.name, +d.dataset.depth, getComputedStyle(d).backgroundColor]),
      top: Array.from(document.querySelectorAll('#top tbody tr')).map((t) => ({ name: t.dataset.name,
        flat: +t.dataset.flat, baseFlat: +t.dataset.baseFlat, change: +t.dataset.change,
        cum: +t.dataset.cum, baseCum: +t.dataset.baseCum, cumChange: +t.dataset.cumChange,
        text: Array.from(t.cells).map((c) => c.textContent) })) };
  });
  return { url: p.url(), ...st };
}

const diffReady = () => document.getElementById('top').dataset.diff === '1' &&
  document.querySelectorAll('#top tbody tr').length > 0 &&
  document.querySelectorAll('#filters button').length === 1 &&
  document.querySelector('#flame .f[data-change]') !== null;

async function diff(ctx, page, v) {
  await page.goto(v.url, { waitUntil: 'load', timeout: 30000 });
  await page.waitForFunction(() => document.getElementById('flame').dataset.state === 'ready' &&
    document.querySelectorAll('#filters button').length === 1, null, { timeout: 30000, polling: 200 });
  await page.locator('#base-set').click();
  await page.waitForFunction(() => location.hash.includes('base=1'), null, { timeout: 30000 });
  await page.locator('#filters button').first().click();
  await page.waitForFunction(() => document.querySelectorAll('#filters button').length === 0, null,
    { timeout: 30000 });
  await page.selectOption('#group-by', v.key);
  const link = '#groups tbody tr[data-value=' + JSON.stringify(v.value) + '] a';
  await page.locator(link).click({ timeout: 30000 });
  await page.waitForFunction(diffReady, null, { timeout: 30000, polling: 200 });
  const out = { first: await diffState(page) };
  const fresh = await ctx.newPage();
  await fresh.goto(out.first.url, { waitUntil: 'load', timeout: 30000 });
  await fresh.waitForFunction(diffReady, null, { timeout: 30000, polling: 200 });
  out.second = await diffState(fresh);
  await fresh.close();
  return out;
}

const barsOf = (p) => p.$$eval('#timeline .tb', (bs) => bs.map((b) => [+b.dataset.start, +b.dataset.total]));
const hashHas = (p, k) => p.waitForFunction((key) => new URLSearchParams(location.hash.slice(1)).has(key), k,
  { timeout: 30000 });
const timeDiffReady = () => document.getElementById('top').dataset.diff === '1' &&
  document.querySelectorAll('#top tbody tr').length > 0 &&
  document.querySelector('#flame .f[data-change]') !== null;

// a diff by time range chosen in the page: the first bar with a value is the baseline, the last
// the comparison
async function timeDiff(ctx, page, v) {
  await page.goto(v.url, { waitUntil: 'load', timeout: 30000 });
  await page.waitForSelector('#timeline .tb:not(.zero)', { timeout: 30000 });
  await page.uncheck('#live'); // bars of 1 s slices slide at every poll
  await page.waitForTimeout(500);
  const nz = (await barsOf(page)).filter((b) => b[1] > 0);
  const bar = (b) => page.locator('#timeline .tb[data-start="' + b[0] + '"]');
  await bar(nz[0]).click();
  await hashHas(page, 'from');
  await page.locator('#base-set').click();
  await hashHas(page, 'base_from');
  await bar(nz[nz.length - 1]).click();
  await page.waitForFunction((want) => new URLSearchParams(location.hash.slice(1)).get('from') === String(want),
    nz[nz.length - 1][0], { timeout: 30000 });
  await page.waitForFunction(timeDiffReady, null, { timeout: 30000, polling: 200 });
  await page.waitForTimeout(500); // a load started before the last click lands
  const out = { bars: nz, first: await diffState(page), info: await page.$eval('#base-info', (b) => b.textContent) };
  const fresh = await ctx.newPage();
  await fresh.goto(out.first.url, { waitUntil: 'load', timeout: 30000 });
  await fresh.waitForFunction(timeDiffReady, null, { timeout: 30000, polling: 200 });
  out.second = await diffState(fresh);
  await fresh.close();
  return out;
}

// screenshots: each view opened from its URL in a fresh page of a fixed size, once drawn
async function shots(ctx, v) {
  const out = [];
  for (const s of v.views) {
    const p = await ctx.newPage();
    await p.setViewportSize({ width: v.width, height: v.height });
    await p.goto(s.url, { waitUntil: 'load', timeout: 30000 });
    await p.waitForFunction((w) => {
      const f = document.getElementById('flame'), t = document.getElementById('top');
      return f.dataset.state === 'ready' && document.querySelectorAll('#top tbody tr').length > 0 &&
        (!w.groups || document.querySelectorAll('#groups tbody tr').length > 0) &&
        (!w.diff || t.dataset.diff === '1') && (!w.search || t.dataset.search === w.search) &&
        (!w.zoom || f.dataset.zoom === w.zoom);
    }, s, { timeout: 30000, polling: 200 });
    if (s.scroll) await p.$eval(s.scroll, (e) => e.scrollIntoView({ block: 'start' }));
    await p.waitForTimeout(300); // the last load's redraw
    await p.screenshot({ path: s.file });
    out.push({ file: s.file, url: p.url(), title: await p.$eval('#title', (t) => t.textContent) });
    await p.close();
  }
  return out;
}

(async () => {
  const plan = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
  const result = { series: [], errors: [] };
  const ctx = await chromium.launchPersistentContext(plan.userDataDir, {
    executablePath: '/usr/bin/chromium', headless: true, args: CHROMIUM_ARGS,
    viewport: { width: 1400, height: 1000 }, timeout: 60000 });
  try {
    const page = ctx.pages()[0] || await ctx.newPage();
    if (plan.apiDelayMs) {
      await ctx.route('**/api/**', async (r) => {
        await new Promise((res) => setTimeout(res, plan.apiDelayMs));
        await r.continue();
      });
    }
    page.on('pageerror', (e) => result.errors.push('pageerror: ' + e.message));
    page.on('console', (m) => { if (m.type() === 'error') result.errors.push('console: ' + m.text()); });
    await page.goto(plan.url, { waitUntil: 'load', timeout: 30000 });
    result.browser = ctx.browser() ? ctx.browser().version() : '';
    if (plan.defaults) {
      await page.waitForFunction(() => document.getElementById('flame').dataset.state === 'ready' &&
        document.querySelectorAll('#top tbody tr').length > 0, null, { timeout: 30000, polling: 200 });
      result.defaults = await viewState(page);
      result.defaults.listed = await page.$$eval('nav button', (bs) => bs.map((b) => ({
        service: b.dataset.service, type: b.dataset.type, companion: b.dataset.companion || '' })));
    }
    for (const s of plan.series) result.series.push(await one(page, s));
    if (plan.view) result.view = await view(ctx, page, plan.view);
    if (plan.timeline) result.timeline = await timeline(ctx, page, plan.timeline);
    if (plan.labels) result.labels = await labels(ctx, page, plan.labels);
    if (plan.diff) result.diff = await diff(ctx, page, plan.diff);
    if (plan.timeDiff) result.timeDiff = await timeDiff(ctx, page, plan.timeDiff);
    if (plan.shots) result.shots = await shots(ctx, plan.shots);
    if (plan.empty) {
      const e = await ctx.newPage();
      await e.goto(plan.empty, { waitUntil: 'load', timeout: 30000 });
      await e.waitForSelector('#flame .send code', { timeout: 30000 });
      result.empty = await e.$$eval('#flame .send code', (cs) => cs.map((c) => [c.dataset.send, c.textContent]));
      await e.close();
    }
    if (plan.update) {
      const u = plan.update;
      await selectSeries(page, u);
      const before = await page.$eval('#flame .f[data-depth="0"]', (d) => +d.dataset.total);
      const r = await fetch(u.url, { method: 'POST', body: fs.readFileSync(u.file),
        headers: { 'Content-Type': 'application/octet-stream' } });
      result.update = { before, status: r.status };
      await page.waitForFunction((want) => {
        const d = document.querySelector('#flame .f[data-depth="0"]');
        return d && +d.dataset.total === want;
      }, u.total, { timeout: 30000, polling: 200 });
      result.update.after = await page.$eval('#flame .f[data-depth="0"]', (d) => +d.dataset.total);
      result.update.url = page.url();
    }
    if (plan.screenshot) {
      const s = plan.series[0];
      await selectSeries(page, s);
      if (s.search) await page.fill('#search', s.search);
      await page.screenshot({ path: plan.screenshot, fullPage: true });
      result.screenshot = plan.screenshot;
    }
  } finally {
    await ctx.close();
  }
  console.log(JSON.stringify(result));
})().catch((e) => {
  console.log(JSON.stringify({ fatal: String(e && e.stack || e) }));
  process.exit(1);
});
