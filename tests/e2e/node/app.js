'use strict';
// A tiny app profiled by the real @pyroscope/nodejs client (wall + heap), for profcol's e2e tests.
// Everything it varies comes from the environment so the test decides the values it then checks:
//   PYRO_SERVER   http://127.0.0.1:PORT     PYRO_APP    application name
//   PYRO_TAGS     JSON object of tags       PYRO_LABELS JSON object for wrapWithLabels
//   PYRO_RUN_MS   how long to work          PYRO_FLUSH_MS  flushIntervalMs
//   PYRO_TENANT   optional tenantID (X-Scope-OrgID)
// It prints one JSON line at the end: {"done": true, "iterations": N, "labelled": M}.
const Pyroscope = require('@pyroscope/nodejs');

const server = process.env.PYRO_SERVER;
const runMs = parseInt(process.env.PYRO_RUN_MS || '3000', 10);
const labels = JSON.parse(process.env.PYRO_LABELS || '{}');

Pyroscope.init({
  serverAddress: server,
  appName: process.env.PYRO_APP || 'nodeapp',
  tags: JSON.parse(process.env.PYRO_TAGS || '{}'),
  flushIntervalMs: parseInt(process.env.PYRO_FLUSH_MS || '1000', 10),
  tenantID: process.env.PYRO_TENANT || undefined,
  wall: { samplingIntervalMicros: 5000 },
  heap: { samplingIntervalBytes: 16 * 1024, stackDepth: 32 },
});
Pyroscope.start();

let sink = 0;

function busyWorkInner(n) {
  let x = 0;
  for (let i = 1; i < n; i++) x += Math.sqrt(i) * Math.sin(i);
  return x;
}

function busyWork(ms) {
  const end = Date.now() + ms;
  while (Date.now() < end) sink += busyWorkInner(20000);
}

function busyWorkTraced(ms) {
  const end = Date.now() + ms;
  while (Date.now() < end) sink += busyWorkInner(20000);
}

const retained = [];

function allocateObjects(n) {
  // kept alive so the heap (in-use) profile has samples in this function
  const chunk = [];
  for (let i = 0; i < n; i++) chunk.push({ id: i, name: 'obj-' + i, payload: new Array(16).fill(i) });
  retained.push(chunk);
  if (retained.length > 40) retained.shift();
}

let iterations = 0;
let labelled = 0;
const start = Date.now();
let stopping = false;

// @pyroscope/nodejs 0.6.4 may run one more profiling round after stop() has turned its heap
// profiler off (the round was already scheduled); that round throws "Heap profiler is not
// enabled." and has nothing left to upload. Only that error, and only while stopping, is let
// pass: anything else still fails the app (and the test).
process.on('uncaughtException', (err) => {
  if (stopping && /Heap profiler is not enabled/.test(String(err && err.message))) return;
  console.error(err && err.stack ? err.stack : String(err));
  process.exit(1);
});

function step() {
  if (Date.now() - start >= runMs) {
    stopping = true;
    Pyroscope.stop().then(() => {
      console.log(JSON.stringify({ done: true, iterations, labelled, sink: sink !== 0 }));
      process.exit(0);
    });
    return;
  }
  iterations++;
  busyWork(40);
  Pyroscope.wrapWithLabels(labels, () => {
    busyWorkTraced(40);
    labelled++;
  });
  allocateObjects(2000);
  setImmediate(step); // let the flush timers and their uploads run
}

setImmediate(step);
