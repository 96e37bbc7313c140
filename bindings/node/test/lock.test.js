// SPDX-License-Identifier: MIT
// lock.test.js - the Lock object and the released promise: values,
// exceptions and rejections of the callback, and the fencing token.
'use strict';

const test = require('node:test');
const assert = require('node:assert/strict');
const { managers, deferred } = require('./helpers.js');
const { Lock } = require('../lib/index.js');

test('Lock has name and mode; it cannot be constructed', async (t) => {
  const [m] = managers(t, 'lockobj').list;
  const lock = await m.request('x', { mode: 'shared' }, (l) => l);
  assert.ok(lock instanceof Lock);
  assert.equal(lock.name, 'x');
  assert.equal(lock.mode, 'shared');
  assert.equal(Object.prototype.toString.call(lock), '[object Lock]');
  assert.throws(() => new Lock(), TypeError);
});

test('the promise resolves with the callback result after release',
  async (t) => {
    const [m] = managers(t, 'result').list;
    const d = deferred();
    const p = m.request('r', () => d.promise);
    await new Promise((r) => setImmediate(r));
    let q = await m.query();
    assert.equal(q.held.length, 1);
    d.resolve('value');
    assert.equal(await p, 'value');
    q = await m.query();
    assert.equal(q.held.length, 0);
    assert.equal(await m.request('r', () => 7), 7);
  });

test('a callback that throws rejects the promise and releases', async (t) => {
  const [m] = managers(t, 'throws').list;
  const err = new Error('boom');
  await assert.rejects(m.request('e', () => { throw err; }), (e) => e === err);
  assert.deepEqual((await m.query()).held, []);
  assert.equal(await m.request('e', { ifAvailable: true }, (l) => !!l), true);
});

test('a callback returning a rejected promise rejects and releases',
  async (t) => {
    const [m] = managers(t, 'rejects').list;
    const err = new Error('later');
    await assert.rejects(m.request('e', async () => { throw err; }),
      (e) => e === err);
    assert.deepEqual((await m.query()).held, []);
  });

test('extension: weblocksToken grows with each grant of a name',
  async (t) => {
    const [m] = managers(t, 'token').list;
    const t1 = await m.request('n', (l) => l.weblocksToken);
    const t2 = await m.request('n', (l) => l.weblocksToken);
    assert.equal(typeof t1, 'bigint');
    assert.ok(t2 > t1, `${t2} > ${t1}`);
  });

test('extension: weblocksTimeout rejects with TimeoutError', async (t) => {
  const { list: [a, b] } = managers(t, 'timeout', 2);
  const d = deferred();
  const held = a.request('n', () => d.promise);
  await assert.rejects(b.request('n', { weblocksTimeout: 30 }, () => 1),
    (e) => e instanceof DOMException && e.name === 'TimeoutError');
  assert.deepEqual((await a.query()).pending, []);
  d.resolve();
  await held;
});
