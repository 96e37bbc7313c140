// SPDX-License-Identifier: MIT
// steal-signal.test.js - steal (the holder's promise rejects with
// AbortError) and AbortSignal (before and while queued; its reason).
'use strict';

const test = require('node:test');
const assert = require('node:assert/strict');
const { managers, deferred, within } = require('./helpers.js');

const isAbort = (e) => e instanceof DOMException && e.name === 'AbortError';

test('steal: granted at once; the holder rejects with AbortError',
  async (t) => {
    const { list: [a, b, c] } = managers(t, 'steal', 3);
    const release = deferred();
    const granted = deferred();
    const held = a.request('r', () => {
      granted.resolve();
      return release.promise;
    });
    await within(granted.promise);
    const queued = c.request('r', () => 'queued');
    const order = [];
    const stolenBy = b.request('r', { steal: true }, async (lock) => {
      order.push('steal');
      const q = await b.query();
      // b holds it alone; c still waits, behind b.
      assert.deepEqual(q.held.map((i) => i.clientId), [b.weblocksClientId]);
      assert.deepEqual(q.pending.map((i) => i.clientId),
        [c.weblocksClientId]);
      return lock.mode;
    });
    await assert.rejects(within(held), isAbort);
    assert.equal(await stolenBy, 'exclusive');
    assert.equal(await queued, 'queued');
    // The stolen holder's callback still finishes; releasing does nothing.
    release.resolve('late');
    assert.deepEqual(order, ['steal']);
  });

test('steal with nothing held is a plain grant', async (t) => {
  const [m] = managers(t, 'steal0').list;
  assert.equal(await m.request('r', { steal: true }, (l) => l.name), 'r');
});

test('signal aborted while queued: rejects with its reason', async (t) => {
  const { list: [a, b, c] } = managers(t, 'abortq', 3);
  const release = deferred();
  const granted = deferred();
  const held = a.request('r', () => {
    granted.resolve();
    return release.promise;
  });
  await within(granted.promise);
  const ac = new AbortController();
  let ran = false;
  const aborted = b.request('r', { signal: ac.signal }, () => { ran = true; });
  const behind = c.request('r', () => 'behind');
  assert.equal((await a.query()).pending.length, 2);
  const reason = { why: 'custom' };
  ac.abort(reason);
  await assert.rejects(aborted, (e) => e === reason);
  // It left the queue: only c waits.
  const q = await a.query();
  assert.deepEqual(q.pending.map((i) => i.clientId), [c.weblocksClientId]);
  release.resolve();
  await held;
  assert.equal(await behind, 'behind');
  assert.equal(ran, false);
});

test('signal: default reason is an AbortError DOMException', async (t) => {
  const { list: [a, b] } = managers(t, 'abortdef', 2);
  const release = deferred();
  const granted = deferred();
  const held = a.request('r', () => {
    granted.resolve();
    return release.promise;
  });
  await within(granted.promise);
  const ac = new AbortController();
  const p = b.request('r', { signal: ac.signal }, () => 1);
  ac.abort();
  await assert.rejects(p, isAbort);
  release.resolve();
  await held;
});

test('signal aborted before the request: rejects, nothing queued',
  async (t) => {
    const [m] = managers(t, 'abortpre').list;
    const reason = new Error('already');
    let ran = false;
    await assert.rejects(m.request('r', { signal: AbortSignal.abort(reason) },
      () => { ran = true; }), (e) => e === reason);
    assert.equal(ran, false);
    assert.deepEqual(await m.query(), { held: [], pending: [] });
  });

test('signal aborted after the grant is ignored', async (t) => {
  const [m] = managers(t, 'abortlate').list;
  const ac = new AbortController();
  const r = await m.request('r', { signal: ac.signal }, async () => {
    ac.abort();
    return 'kept';
  });
  assert.equal(r, 'kept');
});

test('signal: AbortSignal.timeout() bounds the wait', async (t) => {
  const { list: [a, b] } = managers(t, 'aborttimeout', 2);
  const release = deferred();
  const granted = deferred();
  const held = a.request('r', () => {
    granted.resolve();
    return release.promise;
  });
  await within(granted.promise);
  await assert.rejects(b.request('r', { signal: AbortSignal.timeout(20) },
    () => 1), (e) => e.name === 'TimeoutError');
  assert.deepEqual((await a.query()).pending, []);
  release.resolve();
  await held;
});
