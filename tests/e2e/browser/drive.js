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
const fs = require('fs');
const { chromium } = require('playwright-core');

const CHROMIUM_ARGS = ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync'];

async function frames(page) {
  return page.$$eval('#flame .f', (ds) => ds.map((d) => ({
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

(async () => {
  const plan = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
  const result = { series: [], errors: [] };
  const ctx = await chromium.launchPersistentContext(plan.userDataDir, {
    executablePath: '/usr/bin/chromium', headless: true, args: CHROMIUM_ARGS,
    viewport: { width: 1400, height: 1000 }, timeout: 60000 });
  try {
    const page = ctx.pages()[0] || await ctx.newPage();
    page.on('pageerror', (e) => result.errors.push('pageerror: ' + e.message));
    page.on('console', (m) => { if (m.type() === 'error') result.errors.push('console: ' + m.text()); });
    await page.goto(plan.url, { waitUntil: 'load', timeout: 30000 });
    result.browser = ctx.browser() ? ctx.browser().version() : '';
    for (const s of plan.series) result.series.push(await one(page, s));
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
