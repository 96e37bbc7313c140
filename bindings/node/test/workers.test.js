// SPDX-License-Identifier: MIT
// workers.test.js - each worker thread is its own client; a worker that
// ends (terminate() included) gives up its locks.
'use strict';

const test = require('node:test');
const assert = require('node:assert/strict');
const path = require('node:path');
const { once } = require('node:events');
const { Worker } = require('node:worker_threads');
const { managers, deferred, within } = require('./helpers.js');

function startWorker(b, extra = {}) {
  const w = new Worker(path.join(__dirname, 'fixtures', 'worker.js'),
    { workerData: { origin: b.origin, ...extra } });
  const messages = [];
  const waiting = [];
  w.on('message', (m) => {
    const i = waiting.findIndex((x) => x.ev === m.ev);
    if (i >= 0) waiting.splice(i, 1)[0].d.resolve(m);
    else messages.push(m);
  });
  w.next = (ev) => {
    const i = messages.findIndex((m) => m.ev === ev);
    if (i >= 0) return Promise.resolve(messages.splice(i, 1)[0]);
    const d = deferred();
    waiting.push({ ev, d });
    return within(d.promise, 5000, `worker ${ev}`);
  };
  w.exited = once(w, 'exit');
  b.defer(() => w.terminate());
  return w;
}

test('a worker is its own client and excludes the main thread',
  async (t) => {
    const b = managers(t, 'worker');
    const [m] = b.list;
    const w = startWorker(b);
    const { clientId } = await w.next('ready');
    assert.notEqual(clientId, m.weblocksClientId);
    w.postMessage('hold');
    await w.next('granted');
    const granted = deferred();
    const mine = m.request('r', () => granted.resolve());
    const q = await m.query();
    assert.deepEqual(q.held.map((i) => i.clientId), [clientId]);
    assert.deepEqual(q.pending.map((i) => i.clientId), [m.weblocksClientId]);
    w.postMessage('release');
    await w.next('settled');
    await within(granted.promise);
    await mine;
    w.postMessage('close');
    await w.exited;
  });

test('terminate() of a worker holding a lock releases it', async (t) => {
  const b = managers(t, 'workerterm');
  const [m] = b.list;
  const w = startWorker(b);
  await w.next('ready');
  w.postMessage('hold');
  await w.next('granted');
  const granted = deferred();
  const mine = m.request('r', () => granted.resolve());
  assert.equal((await m.query()).pending.length, 1);
  await w.terminate();
  await within(granted.promise);
  await mine;
  assert.deepEqual((await m.query()).held, []);
});

test('the polyfill in a worker installs its own navigator.locks',
  async (t) => {
    const b = managers(t, 'workerpoly');
    const [m] = b.list;
    const w = startWorker(b, { polyfill: true });
    const { clientId } = await w.next('ready');
    w.postMessage('hold');
    const g = await w.next('granted');
    assert.equal(g.navigator, true);
    const q = await m.query();
    assert.deepEqual(q.held.map((i) => i.clientId), [clientId]);
    w.postMessage('release');
    await w.next('settled');
    w.postMessage('close');
    await w.exited;
  });
