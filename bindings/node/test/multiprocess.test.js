// SPDX-License-Identifier: MIT
// multiprocess.test.js - several processes (child_process.fork) in one
// bucket: FIFO order across processes, shared mode, steal, query, and a
// holder killed with SIGKILL whose waiter in another process is granted.
// The processes synchronise over IPC; timers only bound the waits.
'use strict';

const test = require('node:test');
const assert = require('node:assert/strict');
const { managers, deferred, within, Child } = require('./helpers.js');

function holder(m, name, options = {}) {
  const release = deferred();
  const granted = deferred();
  const done = m.request(name, options, (lock) => {
    granted.resolve(lock);
    return release.promise;
  });
  return { done, granted: granted.promise, release: release.resolve };
}

// children(b, n): n ready children in bucket b (from managers()), stopped
// after the test, before the bucket is removed.
async function children(b, n) {
  const list = [];
  for (let i = 0; i < n; i++) list.push(new Child(b.origin));
  b.defer(() => Promise.all(list.map((c) => c.stop())));
  for (const c of list) c.clientId = (await c.on('ready')).clientId;
  return list;
}

test('FIFO across processes', async (t) => {
  const b = managers(t, 'mpfifo');
  const [m] = b.list;
  const [c1, c2] = await children(b, 2);
  const h = holder(m, 'r');
  await within(h.granted);
  c1.send({ cmd: 'request', id: 1, name: 'r' });
  await c1.on('requested', 1);
  c2.send({ cmd: 'request', id: 2, name: 'r' });
  await c2.on('requested', 2);
  const again = holder(m, 'r');
  let q = await m.query();
  assert.deepEqual(q.pending.map((i) => i.clientId),
    [c1.clientId, c2.clientId, m.weblocksClientId]);
  h.release();
  await c1.on('granted', 1);
  q = await m.query();
  assert.deepEqual(q.held.map((i) => i.clientId), [c1.clientId]);
  c1.send({ cmd: 'release', id: 1 });
  await c2.on('granted', 2);
  q = await m.query();
  assert.deepEqual(q.held.map((i) => i.clientId), [c2.clientId]);
  assert.deepEqual(q.pending.map((i) => i.clientId), [m.weblocksClientId]);
  c2.send({ cmd: 'release', id: 2 });
  await within(again.granted);
  again.release();
  await Promise.all([h.done, again.done]);
  assert.equal((await c1.on('settled', 1)).ok, true);
  assert.equal((await c2.on('settled', 2)).ok, true);
});

test('shared across processes, then an exclusive waiter', async (t) => {
  const b = managers(t, 'mpshared');
  const [m] = b.list;
  const [c1, c2] = await children(b, 2);
  c1.send({ cmd: 'request', id: 1, name: 'r', options: { mode: 'shared' } });
  c2.send({ cmd: 'request', id: 2, name: 'r', options: { mode: 'shared' } });
  await c1.on('granted', 1);
  await c2.on('granted', 2);
  const x = holder(m, 'r');
  const q = await m.query();
  assert.equal(q.held.length, 2);
  assert.deepEqual(q.pending.map((i) => i.mode), ['exclusive']);
  c1.send({ cmd: 'release', id: 1 });
  await c1.on('settled', 1);
  assert.equal((await m.query()).pending.length, 1);
  c2.send({ cmd: 'release', id: 2 });
  await within(x.granted);
  x.release();
  await x.done;
});

test('query across processes', async (t) => {
  const b = managers(t, 'mpquery');
  const [m] = b.list;
  const [c] = await children(b, 1);
  const h = holder(m, 'mine');
  await within(h.granted);
  c.send({ cmd: 'request', id: 1, name: 'theirs', options: { mode: 'shared' } });
  await c.on('granted', 1);
  c.send({ cmd: 'request', id: 2, name: 'mine' });
  await c.on('requested', 2);
  c.send({ cmd: 'query' });
  const { state } = await c.on('query');
  const q = await m.query();
  for (const s of [state, q]) {
    assert.deepEqual(s.held.map((i) => [i.name, i.mode, i.clientId]).sort(),
      [['mine', 'exclusive', m.weblocksClientId],
        ['theirs', 'shared', c.clientId]]);
    assert.deepEqual(s.pending, [{ name: 'mine', mode: 'exclusive',
      clientId: c.clientId }]);
  }
  h.release();
  await c.on('granted', 2);
  c.send({ cmd: 'release', id: 1 });
  c.send({ cmd: 'release', id: 2 });
  await c.on('settled', 1);
  await c.on('settled', 2);
  await h.done;
});

test('steal across processes: the holder in the child rejects', async (t) => {
  const b = managers(t, 'mpsteal');
  const [m] = b.list;
  const [c] = await children(b, 1);
  c.send({ cmd: 'request', id: 1, name: 'r' });
  await c.on('granted', 1);
  const got = await m.request('r', { steal: true }, (l) => l.name);
  assert.equal(got, 'r');
  const settled = await c.on('settled', 1);
  assert.deepEqual([settled.ok, settled.error], [false, 'AbortError']);
  c.send({ cmd: 'release', id: 1 });
});

test('a holder killed with SIGKILL: the waiter in another process is ' +
  'granted', async (t) => {
  const b = managers(t, 'mpkill');
  const [m] = b.list;
  const [c1, c2] = await children(b, 2);
  c1.send({ cmd: 'request', id: 1, name: 'r' });
  await c1.on('granted', 1);
  c2.send({ cmd: 'request', id: 2, name: 'r' });
  await c2.on('requested', 2);
  const mine = holder(m, 'r', { mode: 'shared' });
  assert.equal((await m.query()).pending.length, 2);
  c1.proc.kill('SIGKILL');
  assert.equal((await c1.exited).signal, 'SIGKILL');
  await c2.on('granted', 2);
  const q = await m.query();
  assert.deepEqual(q.held.map((i) => i.clientId), [c2.clientId]);
  assert.ok(!q.pending.some((i) => i.clientId === c1.clientId));
  c2.send({ cmd: 'release', id: 2 });
  await within(mine.granted);
  mine.release();
  await mine.done;
});

test('a waiter killed with SIGKILL leaves the queue', async (t) => {
  const b = managers(t, 'mpkillq');
  const [m] = b.list;
  const [c1, c2] = await children(b, 2);
  const h = holder(m, 'r');
  await within(h.granted);
  c1.send({ cmd: 'request', id: 1, name: 'r' });
  await c1.on('requested', 1);
  c2.send({ cmd: 'request', id: 2, name: 'r' });
  await c2.on('requested', 2);
  c1.proc.kill('SIGKILL');
  await c1.exited;
  h.release();
  await c2.on('granted', 2);
  c2.send({ cmd: 'release', id: 2 });
  await c2.on('settled', 2);
  await h.done;
});
