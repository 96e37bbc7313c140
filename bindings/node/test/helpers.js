// SPDX-License-Identifier: MIT
// helpers.js - shared by the tests: unique buckets that are removed after
// each test, deferred promises, and bounded waits (timers only bound a wait
// that an event ends; they never stand for synchronisation).
'use strict';

const { fork } = require('node:child_process');
const path = require('node:path');
const { LockManager, removeBucket } = require('../lib/index.js');

// A unique origin per test and process ("node" tells check.sh's count of
// leftover segments ours from other suites' on a shared machine).
function origin(name) {
  return `https://t-${process.pid}-node-${name}`;
}

// managers(t, name, n): n managers (clients) of a fresh bucket; after the
// test they are closed and the bucket removed (which fails the test if a
// process still has it open).
// Cleanups registered with defer() run first, last registered first
// (children must be gone before the bucket can be removed).
function managers(t, name, n = 1) {
  const o = origin(name);
  const list = [];
  const deferredCleanups = [];
  for (let i = 0; i < n; i++) list.push(new LockManager({ origin: o }));
  t.after(async () => {
    try {
      for (const fn of deferredCleanups.reverse()) await fn();
    } finally {
      for (const m of list) m.close();
      removeBucket({ origin: o });
    }
  });
  return { origin: o, list, defer: (fn) => deferredCleanups.push(fn) };
}

function deferred() {
  let resolve, reject;
  const promise = new Promise((res, rej) => { resolve = res; reject = rej; });
  return { promise, resolve, reject };
}

// Rejects if p has not settled within ms: a bound, for a test that would
// otherwise hang when the behaviour under test is broken.
function within(p, ms = 5000, what = 'event') {
  let timer;
  const bound = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no ${what} within ${ms} ms`)),
      ms);
  });
  return Promise.race([p, bound]).finally(() => clearTimeout(timer));
}

// Resolves with 'settled' or 'pending' after the event loop has run the
// completions that are ready now: for asserting that a request is still
// waiting because query() shows it pending in the bucket, not because a
// timer ran out.
async function state(p) {
  let s = 'pending';
  p.then(() => { s = 'settled'; }, () => { s = 'settled'; });
  await new Promise((r) => setImmediate(r));
  return s;
}

// A child process (test/fixtures/child.js) driven over IPC.
class Child {
  constructor(origin) {
    this.proc = fork(path.join(__dirname, 'fixtures', 'child.js'),
      [origin], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
    this.waiters = [];
    this.events = [];
    this.exited = new Promise((r) => this.proc.on('exit',
      (code, signal) => r({ code, signal })));
    this.proc.on('message', (m) => {
      this.events.push(m);
      this.waiters = this.waiters.filter((w) => !(w.match(m) && (w.res(m), 1)));
    });
  }

  send(m) { this.proc.send(m); }

  // The next message (already received or to come) that matches.
  wait(match, ms = 5000) {
    const seen = this.events.find(match);
    if (seen) {
      this.events.splice(this.events.indexOf(seen), 1);
      return Promise.resolve(seen);
    }
    const d = deferred();
    this.waiters.push({ match: (m) => {
      if (!match(m)) return false;
      this.events.splice(this.events.indexOf(m), 1);
      return true;
    }, res: d.resolve });
    return within(d.promise, ms, 'message from child');
  }

  on(ev, id, ms) {
    return this.wait((m) => m.ev === ev && (id === undefined || m.id === id),
      ms);
  }

  async stop() {
    if (this.proc.exitCode === null && this.proc.signalCode === null) {
      this.send({ cmd: 'exit' });
    }
    return within(this.exited, 5000, 'child exit');
  }
}

module.exports = { origin, managers, deferred, within, state, Child,
  LockManager, removeBucket };
