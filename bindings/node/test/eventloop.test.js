// SPDX-License-Identifier: MIT
// eventloop.test.js - the event loop: one descriptor for many requests, and
// the process stays alive exactly while a request is pending or a lock held.
'use strict';

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { spawn } = require('node:child_process');
const { managers, deferred, within } = require('./helpers.js');

function fds() {
  return fs.readdirSync('/proc/self/fd').length;
}

// Run fixtures/alive.js; resolves with { code, out } when it exits.
function alive(origin, what, env = process.env, onLine = () => {}) {
  const child = spawn(process.execPath,
    [path.join(__dirname, 'fixtures', 'alive.js'), origin, what],
    { stdio: ['ignore', 'pipe', 'inherit'], env });
  let out = '';
  child.stdout.on('data', (b) => {
    out += b;
    for (const line of String(b).split('\n')) if (line) onLine(line);
  });
  return within(new Promise((r) => child.on('exit',
    (code) => r({ code, out }))), 10000, `exit of alive.js ${what}`);
}

test('a thousand pending requests cost no descriptor more than one',
  async (t) => {
    const { list: [a, b] } = managers(t, 'fds', 2);
    const release = deferred();
    const granted = deferred();
    const held = a.request('r', () => {
      granted.resolve();
      return release.promise;
    });
    await within(granted.promise);
    const reqs = [b.request('r', () => 0)];
    const before = fds();
    for (let i = 1; i < 1000; i++) reqs.push(b.request('r', () => i));
    assert.equal(fds(), before);
    assert.equal((await a.query()).pending.length, 1000);
    // Granting them one by one is slow in libweblocks (each completion
    // looks at the whole queue ahead of every pending request of the
    // manager: see README, Known limits), so the test ends them at once.
    b.close();
    const results = await Promise.allSettled(reqs);
    assert.ok(results.every((r) => r.status === 'rejected' &&
      r.reason.name === 'InvalidStateError'));
    assert.deepEqual((await a.query()).pending, []);
    release.resolve();
    await held;
  });

test('a hundred requests of one manager are granted in FIFO order',
  async (t) => {
    const { list: [a, b] } = managers(t, 'fifo100', 2);
    const release = deferred();
    const granted = deferred();
    const held = a.request('r', () => {
      granted.resolve();
      return release.promise;
    });
    await within(granted.promise);
    const order = [];
    const reqs = [];
    for (let i = 0; i < 100; i++) reqs.push(b.request('r', () => order.push(i)));
    release.resolve();
    await within(Promise.all([held, ...reqs]), 20000);
    assert.deepEqual(order, [...Array(100).keys()]);
  });

test('an idle manager does not keep the process alive', async (t) => {
  const b = managers(t, 'idle');
  const r = await alive(b.origin, 'idle');
  assert.deepEqual(r, { code: 0, out: 'idle done\n' });
});

test('a held lock keeps the process alive', async (t) => {
  const b = managers(t, 'heldalive');
  const r = await alive(b.origin, 'held');
  assert.deepEqual(r, { code: 0, out: 'released\n' });
});

test('a pending request keeps the process alive', async (t) => {
  const b = managers(t, 'pendalive');
  const [m] = b.list;
  const release = deferred();
  const granted = deferred();
  const held = m.request('r', () => {
    granted.resolve();
    return release.promise;
  });
  await within(granted.promise);
  const r = await alive(b.origin, 'pending', process.env, (line) => {
    if (line === 'requested') release.resolve();
  });
  await held;
  assert.deepEqual(r, { code: 0, out: 'requested\ngranted\n' });
});

test('polyfill: navigator.locks with WEBLOCKS_ORIGIN', async (t) => {
  const b = managers(t, 'polyfill');
  const ok = await alive('', 'polyfill',
    { ...process.env, WEBLOCKS_ORIGIN: b.origin });
  assert.deepEqual(ok, { code: 0, out: 'polyfill p ok\n' });
  const env = { ...process.env };
  delete env.WEBLOCKS_ORIGIN;
  const bad = await alive('', 'polyfill', env);
  assert.notEqual(bad.code, 0);
});
