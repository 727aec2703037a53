// profcol demo: a small Node.js HTTP service profiled with @pyroscope/nodejs. The SDK uploads
// wall-clock profiles (with CPU time) every 10 s to PYROSCOPE_SERVER_ADDRESS, which in the demo
// is profcol's pyroscope receiver (http://profcol:4040), not Pyroscope itself.
// The service drives its own load, so the flame graphs fill without a load generator.
'use strict';

const http = require('node:http');
const crypto = require('node:crypto');
const Pyroscope = require('@pyroscope/nodejs');

const PORT = Number(process.env.PORT || 3000);

Pyroscope.init({
  serverAddress: process.env.PYROSCOPE_SERVER_ADDRESS || 'http://profcol:4040',
  appName: process.env.PYROSCOPE_APPLICATION_NAME || 'demo-node-app',
  tags: { env: 'demo', region: process.env.REGION || 'local' },
  flushIntervalMs: 10000, // upload every 10 s (the SDK's default is 60 s)
  wall: { collectCpuTime: true },
});
Pyroscope.start();

// The three handlers' hot spots, named so they stand out in a flame graph.
function fibonacci(n) {
  return n < 2 ? n : fibonacci(n - 1) + fibonacci(n - 2);
}

function hashPasswords(count) {
  let digest = '';
  for (let i = 0; i < count; i++) {
    digest = crypto.createHash('sha256').update(digest + 'password-' + i).digest('hex');
  }
  return digest;
}

function sortRecords(count) {
  const rows = [];
  for (let i = 0; i < count; i++) rows.push({ id: i, score: Math.sin(i) * 1000 });
  rows.sort((a, b) => a.score - b.score);
  return rows[0].id;
}

const handlers = {
  '/fib': () => String(fibonacci(25)),
  '/login': () => hashPasswords(2000),
  '/report': () => String(sortRecords(50000)),
};

const server = http.createServer((req, res) => {
  const handler = handlers[req.url];
  if (!handler) {
    res.writeHead(404).end('try /fib, /login or /report\n');
    return;
  }
  // labels travel with the samples: profcol turns them into sample attributes
  Pyroscope.wrapWithLabels({ handler: req.url.slice(1) }, () => {
    res.writeHead(200, { 'content-type': 'text/plain' }).end(handler() + '\n');
  });
});

server.listen(PORT, () => {
  console.log(`demo-node-app on :${PORT}, profiles to ${process.env.PYROSCOPE_SERVER_ADDRESS || 'http://profcol:4040'}`);
  // self-driven load: one request to each handler every 100 ms
  setInterval(() => {
    for (const path of Object.keys(handlers)) {
      http.get({ host: '127.0.0.1', port: PORT, path }, (r) => r.resume()).on('error', () => {});
    }
  }, 100);
});

function shutdown() {
  server.close();
  Promise.resolve(Pyroscope.stop()).finally(() => process.exit(0));
}
process.on('SIGTERM', shutdown);
process.on('SIGINT', shutdown);
