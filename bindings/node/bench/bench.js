// SPDX-License-Identifier: MIT
// bench.js - `npm run bench`: weblocks against proper-lockfile (lock files,
// polled) and async-mutex (a promise mutex, one process only), in one run.
//
//   uncontended: one process takes and releases one lock in a loop
//                (await request(name, () => {}), lock() + release(),
//                runExclusive()); ops/s.
//   handoff:     two processes (this one and a fork) each take the same
//                lock N times; inside, each reads a file that names the
//                last holder and writes its own pid, counting the times it
//                took the lock from the other process (handoffs). Rates =
//                both processes' handoffs (and grants) / wall time until
//                both are done.
//
// Environment: BENCH_SCALE multiplies the iteration counts (default 1).
'use strict';

const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { fork } = require('node:child_process');
const { LockManager, removeBucket } = require('../lib/index.js');

const scale = Number(process.env.BENCH_SCALE || 1);
const N = {
  weblocks: 50000 * scale,
  mutex: 500000 * scale,
  lockfile: 2000 * scale,
  handoffWeblocks: 5000 * scale,
  handoffLockfile: 300 * scale,
};
// proper-lockfile retries on a timer: 1 ms apart, its shortest useful
// wait. (node-retry builds an array of every retry's timeout up front, so
// the count is kept small and lock() is called again on ELOCKED.)
const POLL = { retries: 100, factor: 1, minTimeout: 1, maxTimeout: 1 };

async function lockPolling(lockfile, target) {
  for (;;) {
    try {
      return await lockfile.lock(target, { retries: POLL, realpath: false });
    } catch (e) {
      if (e.code !== 'ELOCKED') throw e;
    }
  }
}

const ROUNDS = 5;

function median(xs) {
  const s = [...xs].sort((x, y) => x - y);
  return s[s.length >> 1];
}

function now() { return Number(process.hrtime.bigint()) / 1e9; }

async function rate(n, fn) {
  const t0 = now();
  for (let i = 0; i < n; i++) await fn();
  return n / (now() - t0);
}

// The critical section of the handoff bench: who held it last?
function touch(file) {
  const last = fs.readFileSync(file, 'utf8');
  fs.writeFileSync(file, String(process.pid));
  return last !== String(process.pid) && last !== '' ? 1 : 0;
}

// One side of the handoff bench; returns { grants, handoffs }.
async function side(kind, where, n) {
  const last = path.join(where, 'last');
  let handoffs = 0;
  if (kind === 'weblocks') {
    const m = new LockManager({ origin: `https://bench-node-${where.slice(-6)}` });
    for (let i = 0; i < n; i++) {
      await m.request('h', () => { handoffs += touch(last); });
    }
    m.close();
  } else {
    const lockfile = require('proper-lockfile');
    const target = path.join(where, 'target');
    for (let i = 0; i < n; i++) {
      const release = await lockPolling(lockfile, target);
      handoffs += touch(last);
      await release();
    }
  }
  return { grants: n, handoffs };
}

if (process.argv[2] === 'child') {
  // The forked side: start on the parent's word, report when done.
  process.once('message', async ({ kind, where, n }) => {
    // Disconnect only once the message is out, or it may be lost.
    process.send({ done: await side(kind, where, n) },
      () => process.disconnect());
  });
  process.send({ ready: true });
  return;
}

async function handoff(kind, n) {
  const where = fs.mkdtempSync(path.join(os.tmpdir(), 'wlk-bench-'));
  fs.writeFileSync(path.join(where, 'target'), '');
  fs.writeFileSync(path.join(where, 'last'), '');
  const child = fork(__filename, ['child']);
  // A child that fails must fail the bench, not leave it waiting.
  const exited = new Promise((r) => child.on('exit', r));
  const failed = new Promise((_, reject) => child.on('exit', (code, sig) => {
    if (code !== 0) reject(new Error(`${kind} child: exit ${code} ${sig}`));
  }));
  failed.catch(() => {});
  await Promise.race([new Promise((r) => child.once('message', r)), failed]);
  const t0 = now();
  const theirs = new Promise((r) => child.on('message', (m) => m.done &&
    r(m.done)));
  child.send({ kind, where, n });
  const mine = await side(kind, where, n);
  const other = await Promise.race([theirs, failed]);
  const secs = now() - t0;
  await exited;
  if (kind === 'weblocks') {
    removeBucket({ origin: `https://bench-node-${where.slice(-6)}` });
  }
  fs.rmSync(where, { recursive: true });
  const grants = mine.grants + other.grants;
  return { rate: grants / secs, grants, handoffs: mine.handoffs +
    other.handoffs, secs };
}

async function main() {
  if (process.env.BENCH_ONLY) return handoffs();
  const { Mutex } = require('async-mutex');
  const lockfile = require('proper-lockfile');
  const origin = `https://bench-node-${process.pid}`;
  const m = new LockManager({ origin });
  const mutex = new Mutex();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'wlk-bench-'));
  const file = path.join(dir, 'target');
  fs.writeFileSync(file, '');
  const fmt = (x) => Math.round(x).toLocaleString('en-US');

  console.log(`node ${process.version}, ${os.cpus().length} CPUs, ` +
    `${os.cpus()[0].model}`);
  console.log('uncontended request+release (one process), ops/s, median ' +
    `of ${ROUNDS} interleaved rounds:`);
  // A short warm-up of each, so that none pays for JIT and first mappings.
  await rate(1000, () => m.request('u', () => {}));
  await rate(1000, () => mutex.runExclusive(() => {}));
  // Rounds of each in turn, so that a change in the machine's load (it may
  // be shared) weighs on all three alike; the median of each is reported.
  const runs = { w: [], a: [], l: [] };
  for (let r = 0; r < ROUNDS; r++) {
    runs.w.push(await rate(N.weblocks / ROUNDS, () => m.request('u',
      () => {})));
    runs.a.push(await rate(N.mutex / ROUNDS, () => mutex.runExclusive(
      () => {})));
    runs.l.push(await rate(N.lockfile / ROUNDS, async () => {
      const release = await lockfile.lock(file, { realpath: false });
      await release();
    }));
  }
  const w = median(runs.w);
  const a = median(runs.a);
  const l = median(runs.l);
  m.close();
  removeBucket({ origin });
  fs.rmSync(dir, { recursive: true });
  console.log(`  weblocks         ${fmt(w).padStart(12)}`);
  console.log(`  async-mutex      ${fmt(a).padStart(12)}   ` +
    '(in-process only)');
  console.log(`  proper-lockfile  ${fmt(l).padStart(12)}`);
  console.log(`  weblocks / proper-lockfile = ${(w / l).toFixed(1)}x; ` +
    `async-mutex / weblocks = ${(a / w).toFixed(2)}x`);

  await handoffs();
}

async function handoffs() {
  const fmt = (x) => Math.round(x).toLocaleString('en-US');
  console.log('two-process handoff (both take the lock N times each):');
  // A grant is a handoff when the other process held the lock last. FIFO
  // alternates the two; proper-lockfile lets the releaser take it again
  // before the other's next poll, so handoffs/s is the measure of passing
  // the lock between processes, grants/s of throughput.
  const show = (name, h) => console.log(`  ${name.padEnd(16)} ` +
    `${fmt(h.handoffs / h.secs).padStart(8)} handoffs/s ` +
    `${fmt(h.rate).padStart(8)} grants/s (${h.grants} grants, ` +
    `${h.handoffs} handoffs, ${h.secs.toFixed(2)} s)`);
  if (process.env.BENCH_ONLY === 'lockfile') {
    return show('proper-lockfile', await handoff('lockfile',
      N.handoffLockfile));
  }
  const hw = await handoff('weblocks', N.handoffWeblocks);
  show('weblocks', hw);
  const hl = await handoff('lockfile', N.handoffLockfile);
  show('proper-lockfile', hl);
  console.log('  weblocks / proper-lockfile = ' +
    `${(hw.handoffs / hw.secs / (hl.handoffs / hl.secs)).toFixed(1)}x ` +
    `in handoffs/s, ${(hw.rate / hl.rate).toFixed(1)}x in grants/s`);
}

main().catch((e) => {
  console.error(e);
  process.exitCode = 1;
});
