// SPDX-License-Identifier: MIT
// validation.test.js - argument conversion and the request() steps, in the
// spec's order: TypeError (WebIDL) before InvalidStateError (step 3),
// SecurityError (4), '-' names (5), steal + ifAvailable (6), steal +
// shared (7), signal + steal or ifAvailable (8), an aborted signal (9).
'use strict';

const test = require('node:test');
const assert = require('node:assert/strict');
const { managers, LockManager, removeBucket, origin, deferred, within } =
  require('./helpers.js');

const noop = () => {};

async function rejectsWith(p, name, ctor = DOMException) {
  await assert.rejects(p, (e) => {
    assert.ok(e instanceof ctor, `${e} is not a ${ctor.name}`);
    assert.equal(e.name, name);
    return true;
  });
}

test('request() returns a rejected promise, never throws', async (t) => {
  const [m] = managers(t, 'nothrow').list;
  let p;
  assert.doesNotThrow(() => { p = m.request(); });
  await rejectsWith(p, 'TypeError', TypeError);
});

test('TypeError for missing or non-callable callbacks', async (t) => {
  const [m] = managers(t, 'cb').list;
  await rejectsWith(m.request('a'), 'TypeError', TypeError);
  await rejectsWith(m.request('a', {}), 'TypeError', TypeError);
  await rejectsWith(m.request('a', {}, 'nope'), 'TypeError', TypeError);
  await rejectsWith(m.request('a', {}, null), 'TypeError', TypeError);
});

test('TypeError for bad options, mode and signal', async (t) => {
  const [m] = managers(t, 'opts').list;
  await rejectsWith(m.request('a', 5, noop), 'TypeError', TypeError);
  await rejectsWith(m.request('a', { mode: 'bogus' }, noop), 'TypeError',
    TypeError);
  await rejectsWith(m.request('a', { mode: 'Shared' }, noop), 'TypeError',
    TypeError);
  await rejectsWith(m.request('a', { signal: {} }, noop), 'TypeError',
    TypeError);
  await rejectsWith(m.request(Symbol('s'), noop), 'TypeError', TypeError);
  await rejectsWith(m.request('a', { weblocksTimeout: -1 }, noop),
    'TypeError', TypeError);
});

test('null and undefined options are the defaults', async (t) => {
  const [m] = managers(t, 'defaults').list;
  for (const o of [undefined, null, {}]) {
    assert.equal(await m.request('a', o, (l) => l.mode), 'exclusive');
  }
  // Names are converted with ToString, as a DOMString.
  assert.equal(await m.request(12, (l) => l.name), '12');
});

test("NotSupportedError: '-' names and forbidden combinations", async (t) => {
  const [m] = managers(t, 'notsup').list;
  const signal = new AbortController().signal;
  await rejectsWith(m.request('-a', noop), 'NotSupportedError');
  await rejectsWith(m.request('a', { steal: true, ifAvailable: true }, noop),
    'NotSupportedError');
  await rejectsWith(m.request('a', { steal: true, mode: 'shared' }, noop),
    'NotSupportedError');
  await rejectsWith(m.request('a', { signal, steal: true }, noop),
    'NotSupportedError');
  await rejectsWith(m.request('a', { signal, ifAvailable: true }, noop),
    'NotSupportedError');
  // None of them was queued or granted.
  assert.deepEqual(await m.query(), { held: [], pending: [] });
});

test('order: conversion errors come before every spec step', async (t) => {
  const [m] = managers(t, 'order1').list;
  // A bad mode on a '-' name is a TypeError, not NotSupportedError.
  await rejectsWith(m.request('-a', { mode: 'x' }, noop), 'TypeError',
    TypeError);
  // A bad callback on a closed manager is a TypeError too.
  const o = origin('order1b');
  const c = new LockManager({ origin: o });
  c.close();
  removeBucket({ origin: o });
  await rejectsWith(c.request('a', {}, 1), 'TypeError', TypeError);
  await rejectsWith(c.request('-a', { steal: true, ifAvailable: true },
    noop), 'InvalidStateError');
});

test('order: an aborted signal comes last', async (t) => {
  const [m] = managers(t, 'order2').list;
  const ac = new AbortController();
  const reason = new Error('why');
  ac.abort(reason);
  // Steps 5-8 win over step 9.
  await rejectsWith(m.request('-a', { signal: ac.signal }, noop),
    'NotSupportedError');
  await rejectsWith(m.request('a', { signal: ac.signal, steal: true }, noop),
    'NotSupportedError');
  // Step 9: the reason itself, not a copy.
  await assert.rejects(m.request('a', { signal: ac.signal }, noop),
    (e) => e === reason);
  // steal + ifAvailable (6) before steal + shared (7): both are
  // NotSupportedError, so only the name tells; and '-' (5) before both.
  await rejectsWith(m.request('-a', { steal: true, mode: 'shared' }, noop),
    'NotSupportedError');
});

test('SecurityError for an opaque origin, after conversion', async () => {
  const m = new LockManager({ origin: 'null' });
  await rejectsWith(m.request('a', noop), 'SecurityError');
  await rejectsWith(m.query(), 'SecurityError');
  await rejectsWith(m.request('a', { mode: 'x' }, noop), 'TypeError',
    TypeError);
});

test('constructor: TypeError without an origin', () => {
  assert.throws(() => new LockManager(), TypeError);
  assert.throws(() => new LockManager({}), TypeError);
  assert.throws(() => new LockManager({ origin: '' }), TypeError);
  assert.throws(() => new LockManager({ origin: 'https://a\0b' }),
    TypeError);
});

test('InvalidStateError once closed; queued requests reject', async (t) => {
  const { list: [m, other] } = managers(t, 'closed', 2);
  // The callbacks never settle: closing is what ends m's locks.
  const forever = () => new Promise(() => {});
  const granted = [deferred(), deferred()];
  m.request('a', () => { granted[0].resolve(); return forever(); });
  other.request('b', () => { granted[1].resolve(); return forever(); });
  const queued = m.request('b', () => 1);
  await within(Promise.all(granted.map((d) => d.promise)));
  assert.equal((await other.query()).pending.length, 1);
  m.close();
  await rejectsWith(queued, 'InvalidStateError');
  await rejectsWith(m.request('a', noop), 'InvalidStateError');
  await rejectsWith(m.query(), 'InvalidStateError');
  // Its lock on "a" is gone and its request for "b" left the queue.
  const q = await other.query();
  assert.deepEqual(q.held.map((i) => i.name), ['b']);
  assert.deepEqual(q.pending, []);
  assert.equal(await other.request('a', { ifAvailable: true }, (l) => !!l),
    true);
});

test('QuotaExceededError when the name table is full', async (t) => {
  const [m] = managers(t, 'quota').list;
  // The bucket's default capacity is 1024 names in use (WLK_DEFAULT_MAX_NAMES);
  // held names are in use, so the 1025th distinct name finds no room.
  const release = deferred();
  const all = [];
  for (let i = 0; i < 1024; i++) {
    all.push(m.request(`n${i}`, () => release.promise));
  }
  await rejectsWith(m.request('one-more', () => 1), 'QuotaExceededError');
  // Nothing was queued for it, and once names are free it works.
  assert.ok(!(await m.query()).pending.some((i) => i.name === 'one-more'));
  release.resolve();
  await Promise.all(all);
  assert.equal(await m.request('one-more', (l) => l.name), 'one-more');
});

test('close() from inside a callback, with requests queued', async (t) => {
  const { list: [m, other] } = managers(t, 'closeincb', 2);
  const release = deferred();
  const granted = deferred();
  const held = other.request('r', () => {
    granted.resolve();
    return release.promise;
  });
  await within(granted.promise);
  // These two complete through the descriptor (queued behind other).
  const first = m.request('r', () => {
    m.close(); // inside the callback of a request granted by dispatch
    return 'closed';
  });
  const second = m.request('r', () => 'never');
  release.resolve();
  await held;
  assert.equal(await first, 'closed');
  await rejectsWith(second, 'InvalidStateError');
  assert.deepEqual(await other.query(), { held: [], pending: [] });
});
