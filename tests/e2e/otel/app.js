'use strict';
// A tiny app instrumented with the real OpenTelemetry JS SDK (traces, metrics, logs), for
// profcol's e2e tests (tests/e2e/test_otel_sdk.py). Nothing is auto-configured: every value
// comes from here or from the arguments, so the test knows what to expect.
//
//   node app.js PROTOCOL ENDPOINT [COMPRESSION] [SERVICE]
//     PROTOCOL     http/protobuf | http/json | grpc
//     ENDPOINT     http://127.0.0.1:PORT (OTLP/HTTP: /v1/traces etc. are appended;
//                  gRPC: http:// means plain text, h2c)
//     COMPRESSION  none (default) | gzip
//     SERVICE      service.name (default otel-e2e)
//   (or OTEL_E2E_PROTOCOL, OTEL_E2E_ENDPOINT, OTEL_E2E_COMPRESSION, OTEL_E2E_SERVICE)
//
// It makes three spans (a parent/child pair with attributes of each type, an event, a link to a
// span of another trace, an error status), a counter, a histogram with explicit buckets and a
// gauge, and four log records (one inside the child span), then flushes and shuts every
// provider down (the metrics reader exports once, at shutdown) and prints one JSON line:
//   {"protocol", "service", "resource": {...}, "scope": {...}, "spans": [...],
//    "metrics": [...], "logs": [...],
//    "exports": {"traces": [{"ok", "items", "error", "request"}], "metrics": [...], "logs": [...]}}
// where "request" is the exact OTLP request of that export call (base64 protobuf, or the JSON
// text for http/json) as the SDK's own serializer makes it for the wire (before gzip).
// Exit status 0 only if every export call succeeded and each signal exported at least once.

const api = require('@opentelemetry/api');
const { logs, SeverityNumber } = require('@opentelemetry/api-logs');
const { defaultResource, resourceFromAttributes } = require('@opentelemetry/resources');
const { TracerProvider, BatchSpanProcessor } = require('@opentelemetry/sdk-trace');
const { MeterProvider, PeriodicExportingMetricReader } = require('@opentelemetry/sdk-metrics');
const { LoggerProvider, BatchLogRecordProcessor } = require('@opentelemetry/sdk-logs');
const transformer = require('@opentelemetry/otlp-transformer');

const argv = process.argv.slice(2);
const protocol = argv[0] || process.env.OTEL_E2E_PROTOCOL || 'http/protobuf';
const endpoint = (argv[1] || process.env.OTEL_E2E_ENDPOINT || 'http://127.0.0.1:4318')
  .replace(/\/+$/, '');
const compression = argv[2] || process.env.OTEL_E2E_COMPRESSION || 'none';
const service = argv[3] || process.env.OTEL_E2E_SERVICE || 'otel-e2e';
const TIMEOUT_MS = 5000; // per export call, retries included

function die(msg) {
  process.stderr.write('app.js: ' + msg + '\n');
  process.exit(2);
}

if (!['http/protobuf', 'http/json', 'grpc'].includes(protocol)) die('unknown protocol ' + protocol);
if (!['none', 'gzip'].includes(compression)) die('unknown compression ' + compression);

// every error the SDK reports (export failures included) fails the run
const sdkErrors = [];
api.diag.setLogger({
  error: (...a) => sdkErrors.push(a.map(String).join(' ')),
  warn: (...a) => process.stderr.write('otel warn: ' + a.map(String).join(' ') + '\n'),
  info: () => {}, debug: () => {}, verbose: () => {},
}, api.DiagLogLevel.WARN);

// ---------------------------------------------------------------------------------------------
// exporters, per protocol

const PKG = {
  'http/protobuf': ['trace-otlp-proto', 'metrics-otlp-proto', 'logs-otlp-proto'],
  'http/json': ['trace-otlp-http', 'metrics-otlp-http', 'logs-otlp-http'],
  grpc: ['trace-otlp-grpc', 'metrics-otlp-grpc', 'logs-otlp-grpc'],
}[protocol];
const PATHS = ['/v1/traces', '/v1/metrics', '/v1/logs'];
const SERIALIZERS = protocol === 'http/json'
  ? [transformer.JsonTraceSerializer, transformer.JsonMetricsSerializer,
    transformer.JsonLogsSerializer]
  : [transformer.ProtobufTraceSerializer, transformer.ProtobufMetricsSerializer,
    transformer.ProtobufLogsSerializer];
const SIGNALS = ['traces', 'metrics', 'logs'];
const CLASSES = ['OTLPTraceExporter', 'OTLPMetricExporter', 'OTLPLogExporter'];

const exportsLog = { traces: [], metrics: [], logs: [] };

function makeExporter(i) {
  const Cls = require('@opentelemetry/exporter-' + PKG[i])[CLASSES[i]];
  const url = protocol === 'grpc' ? endpoint : endpoint + PATHS[i];
  const exp = new Cls({ url, compression, timeoutMillis: TIMEOUT_MS, headers: {} });
  // record each export call: the request as the SDK serializes it, and its outcome
  const inner = exp.export.bind(exp);
  const signal = SIGNALS[i];
  exp.export = (items, done) => {
    const bytes = SERIALIZERS[i].serializeRequest(items);
    const rec = {
      ok: false,
      items: signal === 'metrics'
        ? items.scopeMetrics.reduce((n, sm) => n + sm.metrics.reduce(
          (m, md) => m + md.dataPoints.length, 0), 0)
        : items.length,
      request: protocol === 'http/json' ? Buffer.from(bytes).toString('utf8')
        : Buffer.from(bytes).toString('base64'),
      error: null,
    };
    exportsLog[signal].push(rec);
    inner(items, (result) => {
      rec.ok = result.code === 0; // ExportResultCode.SUCCESS
      if (!rec.ok) rec.error = String(result.error && (result.error.stack || result.error));
      done(result);
    });
  };
  return exp;
}

// ---------------------------------------------------------------------------------------------
// resource and scope

const resource = defaultResource().merge(resourceFromAttributes({
  'service.name': service,
  'service.version': '1.4.2',
  'deployment.environment.name': 'e2e',
  'e2e.protocol': protocol,
  'e2e.compression': compression,
}));
const SCOPE = { name: 'profcol-e2e', version: '0.3.1' };

const tracerProvider = new TracerProvider({
  resource,
  spanProcessors: [new BatchSpanProcessor({ exporter: makeExporter(0),
    scheduledDelayMillis: 60000, exportTimeoutMillis: TIMEOUT_MS })],
});
const meterProvider = new MeterProvider({
  resource,
  readers: [new PeriodicExportingMetricReader({
    exporter: makeExporter(1), exportIntervalMillis: 60000, exportTimeoutMillis: TIMEOUT_MS,
  })],
});
const loggerProvider = new LoggerProvider({
  resource,
  processors: [new BatchLogRecordProcessor({ exporter: makeExporter(2),
    scheduledDelayMillis: 60000, exportTimeoutMillis: TIMEOUT_MS })],
});

// ---------------------------------------------------------------------------------------------
// the data: fixed times (a whole second 10 s ago, plus fixed nanosecond offsets)

const BASE_S = Math.floor(Date.now() / 1000) - 10;
const hr = (ns) => [BASE_S + Math.floor(ns / 1e9), ns % 1e9];
const nsStr = (ns) => (BigInt(BASE_S) * 1000000000n + BigInt(ns)).toString();

const tracer = tracerProvider.getTracer(SCOPE.name, SCOPE.version);
const KIND = ['INTERNAL', 'SERVER', 'CLIENT', 'PRODUCER', 'CONSUMER'];
const STATUS = ['UNSET', 'OK', 'ERROR'];
const sentSpans = [];

function describeSpan(span, d) {
  const sc = span.spanContext();
  return {
    name: d.name,
    kind: KIND[d.kind],
    traceId: sc.traceId,
    spanId: sc.spanId,
    parentSpanId: d.parent ? d.parent.spanContext().spanId : '',
    start: nsStr(d.start),
    end: nsStr(d.end),
    attributes: d.attributes,
    events: (d.events || []).map((e) => ({ name: e.name, time: nsStr(e.time),
      attributes: e.attributes })),
    links: (d.links || []).map((l) => ({ traceId: l.span.spanContext().traceId,
      spanId: l.span.spanContext().spanId, attributes: l.attributes })),
    status: d.status ? { code: STATUS[d.status.code], message: d.status.message || '' }
      : { code: 'UNSET', message: '' },
  };
}

function makeSpan(d) {
  const ctx = d.parent ? api.trace.setSpan(api.context.active(), d.parent) : undefined;
  const span = tracer.startSpan(d.name, {
    kind: d.kind,
    startTime: hr(d.start),
    attributes: d.attributes,
    links: (d.links || []).map((l) => ({ context: l.span.spanContext(),
      attributes: l.attributes })),
  }, ctx);
  for (const e of d.events || []) span.addEvent(e.name, e.attributes, hr(e.time));
  if (d.status) span.setStatus(d.status);
  span.__desc = d;
  return span;
}

const background = makeSpan({
  name: 'background.refresh', kind: api.SpanKind.INTERNAL, start: 1000, end: 250001000,
  attributes: { 'job.name': 'refresh-cache', 'job.attempt': 1 },
});
const root = makeSpan({
  name: 'GET /checkout', kind: api.SpanKind.SERVER, start: 300000000, end: 900000123,
  attributes: {
    'http.request.method': 'GET', 'http.route': '/checkout', 'http.response.status_code': 200,
    'e2e.ratio': 0.75, 'e2e.cached': false, 'e2e.tags': ['blue', 'green'],
    'e2e.sizes': [3, 5, 8], 'e2e.weights': [0.5, 1.25],
  },
  events: [{ name: 'cache.miss', time: 310000042, attributes: { 'cache.key': 'cart:42' } }],
  status: { code: api.SpanStatusCode.OK },
});
const child = makeSpan({
  name: 'SELECT orders', kind: api.SpanKind.CLIENT, start: 400000000, end: 650000777,
  parent: root,
  attributes: { 'db.system.name': 'postgresql', 'db.query.text': 'SELECT * FROM orders',
    'db.response.returned_rows': 17 },
  events: [{ name: 'retry', time: 500000000, attributes: { attempt: 2, 'e2e.backoff': 0.125 } }],
  links: [{ span: background, attributes: { 'link.kind': 'follows-from', 'e2e.weight': 3 } }],
  status: { code: api.SpanStatusCode.ERROR, message: 'deadlock detected' },
});

// ---------------------------------------------------------------------------------------------
// metrics

const meter = meterProvider.getMeter(SCOPE.name, SCOPE.version);
const counter = meter.createCounter('e2e.requests', { unit: '{request}',
  description: 'requests served' });
const histogram = meter.createHistogram('e2e.latency', { unit: 'ms',
  description: 'request latency', advice: { explicitBucketBoundaries: [10, 100, 1000] } });
const gauge = meter.createGauge('e2e.temperature', { unit: 'Cel' });

const COUNTER_ADDS = [[3, { route: '/checkout' }], [4, { route: '/checkout' }],
  [5, { route: '/cart' }]];
const HIST_VALUES = [5, 20.5, 50, 150, 2000.25];
const HIST_ATTRS = { route: '/checkout' };
const GAUGE_VALUES = [[21.5, { room: 'a' }], [19.25, { room: 'a' }], [-3.5, { room: 'b' }]];
for (const [v, a] of COUNTER_ADDS) counter.add(v, a);
for (const v of HIST_VALUES) histogram.record(v, HIST_ATTRS);
for (const [v, a] of GAUGE_VALUES) gauge.record(v, a);

const sentMetrics = [
  { name: 'e2e.requests', type: 'sum', unit: '{request}', description: 'requests served',
    monotonic: true, temporality: 'CUMULATIVE',
    points: [{ attributes: { route: '/checkout' }, value: 7 },
      { attributes: { route: '/cart' }, value: 5 }] },
  { name: 'e2e.latency', type: 'histogram', unit: 'ms', description: 'request latency',
    temporality: 'CUMULATIVE',
    points: [{ attributes: HIST_ATTRS, count: HIST_VALUES.length,
      sum: HIST_VALUES.reduce((a, b) => a + b, 0), min: Math.min(...HIST_VALUES),
      max: Math.max(...HIST_VALUES), bounds: [10, 100, 1000], buckets: [1, 2, 1, 1] }] },
  { name: 'e2e.temperature', type: 'gauge', unit: 'Cel', description: '',
    points: [{ attributes: { room: 'a' }, value: 19.25 }, { attributes: { room: 'b' },
      value: -3.5 }] },
];

// ---------------------------------------------------------------------------------------------
// logs

const logger = loggerProvider.getLogger(SCOPE.name, SCOPE.version);
const LOGS = [
  { severityNumber: SeverityNumber.INFO, severityText: 'INFO', body: 'user logged in',
    attributes: { 'user.id': 'u-42', attempt: 2 }, time: 300000100 },
  { severityNumber: SeverityNumber.WARN, severityText: 'WARN',
    body: { msg: 'disk almost full', pct: 91.5, mounts: ['/', '/var'] },
    attributes: { 'disk.device': '/dev/sda1' }, time: 300000200 },
  { severityNumber: SeverityNumber.ERROR, severityText: 'ERROR', body: 'query failed: deadlock',
    attributes: { 'db.system.name': 'postgresql', 'e2e.retryable': true }, time: 500000300,
    inSpan: child },
  { severityNumber: SeverityNumber.DEBUG2, severityText: 'DEBUG2', eventName: 'e2e.cache.stats',
    body: 42, attributes: { 'cache.hits': 40, 'cache.ratio': 0.95 }, time: 900000400 },
];
const sentLogs = [];
for (const l of LOGS) {
  const rec = { severityNumber: l.severityNumber, severityText: l.severityText, body: l.body,
    attributes: l.attributes, timestamp: hr(l.time), observedTimestamp: hr(l.time + 5) };
  if (l.eventName) rec.eventName = l.eventName;
  if (l.inSpan) rec.context = api.trace.setSpan(api.context.active(), l.inSpan);
  logger.emit(rec);
  sentLogs.push({
    severityNumber: l.severityNumber, severityText: l.severityText, body: l.body,
    attributes: l.attributes, time: nsStr(l.time), observedTime: nsStr(l.time + 5),
    eventName: l.eventName || '',
    traceId: l.inSpan ? l.inSpan.spanContext().traceId : '',
    spanId: l.inSpan ? l.inSpan.spanContext().spanId : '',
  });
}

// end the spans last-started first; a child ends before its parent
for (const s of [child, root, background]) {
  s.end(hr(s.__desc.end));
  sentSpans.push(describeSpan(s, s.__desc));
}

// ---------------------------------------------------------------------------------------------
// flush, shut down, report

async function main() {
  // each step bounded; a failing step is reported and the next ones still run
  const flushErrors = [];
  const steps = [['traces flush', () => tracerProvider.forceFlush()],
    ['logs flush', () => loggerProvider.forceFlush()],
    ['traces shutdown', () => tracerProvider.shutdown()],
    ['logs shutdown', () => loggerProvider.shutdown()],
    ['metrics shutdown', () => meterProvider.shutdown()]]; // collects and exports once
  for (const [what, fn] of steps) {
    let timer;
    const limit = new Promise((_, reject) => {
      timer = setTimeout(() => reject(new Error('took more than 8 s')), 8000);
    });
    try {
      await Promise.race([fn(), limit]);
    } catch (e) {
      flushErrors.push(what + ': ' + (Array.isArray(e) ? e : [e]).map(String).join('; '));
    } finally {
      clearTimeout(timer);
    }
  }
  const out = {
    protocol, compression, service, endpoint,
    resource: resource.attributes,
    scope: SCOPE,
    spans: sentSpans,
    metrics: sentMetrics,
    logs: sentLogs,
    exports: exportsLog,
    sdkErrors,
  };
  const problems = [];
  for (const s of SIGNALS) {
    if (!exportsLog[s].length) problems.push(s + ': no export call');
    for (const e of exportsLog[s]) if (!e.ok) problems.push(s + ': export failed: ' + e.error);
  }
  problems.push(...flushErrors, ...sdkErrors.map((e) => 'sdk error: ' + e));
  out.problems = problems;
  process.stdout.write(JSON.stringify(out) + '\n');
  process.exitCode = problems.length ? 1 : 0;
}

main().catch((e) => {
  const all = Array.isArray(e) ? e : [e];
  process.stderr.write('app.js: ' + all.map((x) => (x && x.stack) || String(x)).join('\n') + '\n');
  process.exitCode = 1;
});
