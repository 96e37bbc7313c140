// SPDX-License-Identifier: MIT
// modes.test.js - exclusive, shared and mixed requests in one process, and
// their FIFO order; ifAvailable.
'use strict';

const test = require('node:test');
const assert = require('node:assert/strict');
const { managers, deferred, within } = require('./helpers.js');

// hold(m, name, options, log): a request whose callback logs its grant and
// holds the lock until the returned release() is called.
function hold(m, name, options, log, tag) {
  const release = deferred();
  const granted = deferred();
  const done = m.request(name, options, (lock) => {
    log.push(tag);
    granted.resolve(lock);
    return release.promise;
  });
  return { done, granted: granted.promise, release: () => release.resolve() };
}

test('exclusive: one holder at a time, granted in request order',
  async (t) => {
    const { list } = managers(t, 'excl', 3);
    const log = [];
    const h = list.map((m, i) => hold(m, 'r', {}, log, i));
    await within(h[0].granted);
    const q = await list[0].query();
    assert.equal(q.held.length, 1);
    assert.deepEqual(q.pending.map((p) => p.clientId),
      [list[1].weblocksClientId, list[2].weblocksClientId]);
    assert.deepEqual(log, [0]);
    h[0].release();
    await within(h[1].granted);
    assert.deepEqual(log, [0, 1]);
    h[1].release();
    await within(h[2].granted);
    h[2].release();
    await Promise.all(h.map((x) => x.done));
    assert.deepEqual(log, [0, 1, 2]);
  });

test('shared: holders coexist', async (t) => {
  const { list } = managers(t, 'shared', 3);
  const log = [];
  const h = list.map((m, i) => hold(m, 'r', { mode: 'shared' }, log, i));
  await within(Promise.all(h.map((x) => x.granted)));
  const q = await list[0].query();
  assert.equal(q.held.length, 3);
  assert.ok(q.held.every((i) => i.mode === 'shared'));
  h.forEach((x) => x.release());
  await Promise.all(h.map((x) => x.done));
});

test('mixed: FIFO; a shared request waits behind a queued exclusive one',
  async (t) => {
    const { list: [a, b, c, d] } = managers(t, 'mixed', 4);
    const log = [];
    const s1 = hold(a, 'r', { mode: 'shared' }, log, 's1');
    await within(s1.granted);
    const x = hold(b, 'r', {}, log, 'x');
    const s2 = hold(c, 'r', { mode: 'shared' }, log, 's2');
    const s3 = hold(d, 'r', { mode: 'shared' }, log, 's3');
    const q = await a.query();
    // s2 is compatible with s1 but queued behind x: writers do not starve.
    assert.deepEqual(q.pending.map((p) => p.mode),
      ['exclusive', 'shared', 'shared']);
    assert.deepEqual(log, ['s1']);
    s1.release();
    await within(x.granted);
    assert.deepEqual(log, ['s1', 'x']);
    x.release();
    // Both shared requests are granted together.
    await within(Promise.all([s2.granted, s3.granted]));
    assert.equal((await a.query()).held.length, 2);
    s2.release();
    s3.release();
    await Promise.all([s1, x, s2, s3].map((h) => h.done));
  });

test('one client: its own requests queue behind its own lock', async (t) => {
  const [m] = managers(t, 'self').list;
  const log = [];
  const first = hold(m, 'r', {}, log, 1);
  const second = hold(m, 'r', {}, log, 2);
  await within(first.granted);
  assert.equal((await m.query()).pending.length, 1);
  first.release();
  await within(second.granted);
  second.release();
  await Promise.all([first.done, second.done]);
  assert.deepEqual(log, [1, 2]);
});

test('names are independent', async (t) => {
  const [m] = managers(t, 'indep').list;
  const log = [];
  const a = hold(m, 'a', {}, log, 'a');
  const b = hold(m, 'b', {}, log, 'b');
  await within(Promise.all([a.granted, b.granted]));
  a.release();
  b.release();
  await Promise.all([a.done, b.done]);
});

test('ifAvailable: null when held, the lock when free, never pending',
  async (t) => {
    const { list: [a, b] } = managers(t, 'ifavail', 2);
    const log = [];
    const h = hold(a, 'r', {}, log, 'h');
    await within(h.granted);
    let seen;
    const r = await b.request('r', { ifAvailable: true }, async (lock) => {
      seen = lock;
      // Still not queued while its callback runs.
      return (await b.query()).pending.length;
    });
    assert.equal(seen, null);
    assert.equal(r, 0);
    // Shared is available beside nothing but shared.
    assert.equal(await b.request('r', { ifAvailable: true, mode: 'shared' },
      (l) => l), null);
    h.release();
    await h.done;
    const lock = await b.request('r', { ifAvailable: true }, (l) => l);
    assert.equal(lock.name, 'r');
  });

test('ifAvailable: not granted past a queued request', async (t) => {
  const { list: [a, b, c] } = managers(t, 'ifavail2', 3);
  const log = [];
  const s = hold(a, 'r', { mode: 'shared' }, log, 's');
  await within(s.granted);
  const x = hold(b, 'r', {}, log, 'x');
  // A shared lock is held, but an exclusive request is queued first.
  assert.equal(await c.request('r', { ifAvailable: true, mode: 'shared' },
    (l) => l), null);
  s.release();
  await within(x.granted);
  x.release();
  await Promise.all([s.done, x.done]);
});
