// SPDX-License-Identifier: MIT
// names-query.test.js - resource names (empty, unicode, lone surrogates,
// '-' prefix) and query() (ordering, clientId).
'use strict';

const test = require('node:test');
const assert = require('node:assert/strict');
const { managers, deferred, within, LockManager, origin, removeBucket } =
  require('./helpers.js');

function holder(m, name, options = {}) {
  const release = deferred();
  const granted = deferred();
  const done = m.request(name, options, (lock) => {
    granted.resolve(lock);
    return release.promise;
  });
  return { done, granted: granted.promise, release: release.resolve };
}

test('names: empty, unicode and astral names round-trip', async (t) => {
  const [m] = managers(t, 'names').list;
  const names = ['', 'é', '\u00e9', 'e\u0301', '日本語', '🔒', 'a b', 'a\0b',
    'x'.repeat(1000)];
  const hs = names.map((n) => holder(m, n));
  const dup = names.lastIndexOf('\u00e9'); // the second 'é' waits
  await within(Promise.all(hs.filter((_, i) => i !== dup)
    .map((h) => h.granted)));
  // All distinct: every one is held at once ('é' twice is one name,
  // queued behind itself).
  const q = await m.query();
  const held = q.held.map((i) => i.name).sort();
  const expected = [...new Set(names)].sort();
  assert.deepEqual(held, expected);
  assert.deepEqual(q.pending.map((i) => i.name), ['é']);
  for (const [i, h] of hs.entries()) {
    assert.equal((await within(h.granted)).name, names[i]);
    h.release();
  }
  await Promise.all(hs.map((h) => h.done));
});

test('names: longer than the bucket allows is an Error, not queued',
  async (t) => {
    const [m] = managers(t, 'toolong').list;
    await assert.rejects(m.request('y'.repeat(1025), () => 1),
      (e) => e.code === 'WLK_ENAMETOOLONG');
    // 1024 bytes is the default limit: two-byte characters count twice.
    assert.equal(await m.request('é'.repeat(512), (l) => l.name.length), 512);
    await assert.rejects(m.request('é'.repeat(513), () => 1),
      (e) => e.code === 'WLK_ENAMETOOLONG');
    assert.deepEqual(await m.query(), { held: [], pending: [] });
  });

test("names: '-' is reserved only as a prefix", async (t) => {
  const [m] = managers(t, 'dash').list;
  assert.equal(await m.request('a-', (l) => l.name), 'a-');
  await assert.rejects(m.request('-', () => 1),
    (e) => e.name === 'NotSupportedError');
  await assert.rejects(m.request('-lock', () => 1),
    (e) => e.name === 'NotSupportedError');
  // U+2010 HYPHEN and U+FE63 are not U+002D.
  assert.equal(await m.request('\u2010x', (l) => l.name), '\u2010x');
});

test('names: lone surrogates do not collide (WTF-8)', async (t) => {
  const [m] = managers(t, 'surrogates').list;
  // With UTF-8 and replacement, all of these would be one name, U+FFFD.
  const names = ['\ud800', '\udbff', '\udc00', '\ufffd', '\ud800\udc00',
    '\udc00\ud800', 'a\ud800'];
  const hs = names.map((n) => holder(m, n));
  await within(Promise.all(hs.map((h) => h.granted)));
  const q = await m.query();
  assert.equal(q.pending.length, 0);
  assert.deepEqual(q.held.map((i) => i.name).sort(), [...names].sort());
  for (const h of hs) assert.ok(names.includes((await h.granted).name));
  hs.forEach((h) => h.release());
  await Promise.all(hs.map((h) => h.done));
});

test('query: held and pending with name, mode and clientId', async (t) => {
  const { list: [a, b, c] } = managers(t, 'query', 3);
  const h = holder(a, 'r', { mode: 'shared' });
  await within(h.granted);
  const x = holder(b, 'r');
  const s = holder(c, 'r', { mode: 'shared' });
  const other = holder(c, 'o');
  await within(other.granted);
  const q = await a.query();
  assert.deepEqual(Object.keys(q).sort(), ['held', 'pending']);
  const byName = (n) => q.held.filter((i) => i.name === n);
  assert.deepEqual(byName('r'), [{ name: 'r', mode: 'shared',
    clientId: a.weblocksClientId }]);
  assert.deepEqual(byName('o'), [{ name: 'o', mode: 'exclusive',
    clientId: c.weblocksClientId }]);
  // Pending in request order.
  assert.deepEqual(q.pending, [
    { name: 'r', mode: 'exclusive', clientId: b.weblocksClientId },
    { name: 'r', mode: 'shared', clientId: c.weblocksClientId },
  ]);
  // Every manager of the bucket sees the same state.
  assert.deepEqual(await c.query(), q);
  // Client ids are distinct.
  assert.equal(new Set([a, b, c].map((m) => m.weblocksClientId)).size, 3);
  h.release();
  await within(x.granted);
  x.release();
  await within(s.granted);
  s.release();
  other.release();
  await Promise.all([h, x, s, other].map((v) => v.done));
  assert.deepEqual(await a.query(), { held: [], pending: [] });
});

test('query: buckets and origins are separate', async (t) => {
  const o = origin('sep');
  const a = new LockManager({ origin: o });
  const b = new LockManager({ origin: o, bucket: 'other' });
  const c = new LockManager({ origin: o + '.x' });
  t.after(() => {
    [a, b, c].forEach((m) => m.close());
    removeBucket({ origin: o });
    removeBucket({ origin: o, bucket: 'other' });
    removeBucket({ origin: o + '.x' });
  });
  const h = holder(a, 'r');
  await within(h.granted);
  // Same name, other bucket or origin: free.
  assert.equal(await b.request('r', { ifAvailable: true }, (l) => !!l), true);
  assert.equal(await c.request('r', { ifAvailable: true }, (l) => !!l), true);
  assert.deepEqual(await b.query(), { held: [], pending: [] });
  h.release();
  await h.done;
});

test('extension: clientId given to the constructor', async (t) => {
  const o = origin('cid');
  const m = new LockManager({ origin: o, clientId: 'tab-1' });
  t.after(() => { m.close(); removeBucket({ origin: o }); });
  const q = await m.request('r', () => m.query());
  assert.equal(q.held[0].clientId, 'tab-1');
});
