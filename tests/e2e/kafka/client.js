// An independent Kafka client for profcol's e2e tests: kafkajs (pinned in package-lock.json),
// which shares no code with librdkafka. One run does one thing and prints one JSON report on
// stdout:
//
//   node client.js produce BROKERS TOPIC FILE
//       FILE holds a JSON list of messages {value (base64), key?, headers? {name: value},
//       partition?}; each is produced with acks=all; the report lists {partition, offset} of each
//   node client.js consume BROKERS TOPIC COUNT TIMEOUT_MS [GROUP]
//       reads TOPIC from the earliest offset until COUNT messages arrived or TIMEOUT_MS passed;
//       the report lists {partition, offset, key, value (base64), headers}
//
// BROKERS is a comma-separated host:port list. Exit status 0 unless something failed.
'use strict';
const fs = require('fs');
const { Kafka, logLevel } = require('kafkajs');

function kafka(brokers) {
  return new Kafka({
    clientId: 'profcol-e2e-kafkajs',
    brokers: brokers.split(','),
    logLevel: logLevel.ERROR,
    retry: { initialRetryTime: 100, retries: 10 },
    connectionTimeout: 3000,
  });
}

async function produce(brokers, topic, file) {
  const msgs = JSON.parse(fs.readFileSync(file, 'utf8'));
  const producer = kafka(brokers).producer({ allowAutoTopicCreation: true });
  await producer.connect();
  const out = [];
  for (const m of msgs) {
    const headers = {};
    for (const [k, v] of Object.entries(m.headers || {})) headers[k] = Buffer.from(v);
    const rec = { value: Buffer.from(m.value, 'base64'), headers };
    if (m.key !== undefined && m.key !== null) rec.key = Buffer.from(m.key);
    if (m.partition !== undefined) rec.partition = m.partition;
    const res = await producer.send({ topic, acks: -1, messages: [rec] });
    out.push({ partition: res[0].partition, offset: res[0].baseOffset });
  }
  await producer.disconnect();
  return { produced: out };
}

async function consume(brokers, topic, count, timeoutMs, group) {
  const consumer = kafka(brokers).consumer({
    groupId: group || 'profcol-e2e-' + process.pid + '-' + Date.now(),
    sessionTimeout: 10000,
    heartbeatInterval: 1000,
    maxWaitTimeInMs: 200,
  });
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  const got = [];
  let done;
  const finished = new Promise((resolve) => { done = resolve; });
  const timer = setTimeout(() => done(), timeoutMs);
  await consumer.run({
    eachMessage: async ({ partition, message }) => {
      const headers = {};
      for (const [k, v] of Object.entries(message.headers || {}))
        headers[k] = Buffer.isBuffer(v) ? v.toString() : String(v);
      got.push({
        partition,
        offset: message.offset,
        key: message.key ? message.key.toString() : null,
        value: message.value ? message.value.toString('base64') : '',
        headers,
      });
      if (got.length >= count) done();
    },
  });
  await finished;
  clearTimeout(timer);
  await consumer.disconnect();
  return { consumed: got };
}

async function main() {
  const [mode, brokers, topic, a, b, c] = process.argv.slice(2);
  let report;
  if (mode === 'produce') report = await produce(brokers, topic, a);
  else if (mode === 'consume') report = await consume(brokers, topic, Number(a), Number(b), c);
  else throw new Error('usage: client.js produce|consume ...');
  process.stdout.write(JSON.stringify(report) + '\n');
}

main().then(() => process.exit(0), (err) => {
  process.stderr.write('kafkajs client: ' + (err && err.stack || err) + '\n');
  process.exit(1);
});
