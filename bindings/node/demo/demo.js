// SPDX-License-Identifier: MIT
// demo.js - two processes share navigator.locks (bindings/node/demo.sh).
//
// A "printer" process takes the lock "printer" and is killed with SIGKILL
// while it holds it; a "scanner" process queued behind it is granted the
// lock as soon as the printer dies. The parent watches with query().
'use strict';

const { fork } = require('node:child_process');
const origin = process.env.WEBLOCKS_ORIGIN ||
  `https://demo-${process.pid}.example`;
process.env.WEBLOCKS_ORIGIN = origin;
require('../polyfill.js'); // navigator.locks, origin from WEBLOCKS_ORIGIN

// Children count from the parent's start, so the times line up.
const t0 = Number(process.env.DEMO_T0 || Date.now());
process.env.DEMO_T0 = String(t0);
const say = (who, what) => console.log(
  `${String(Date.now() - t0).padStart(5)} ms  ${who.padEnd(8)} ${what}`);

if (process.argv[2]) {
  // A child: request the lock, tell the parent when granted, hold it.
  const who = process.argv[2];
  const client = navigator.locks.weblocksClientId.slice(0, 8);
  navigator.locks.request('printer', async (lock) => {
    say(who, `granted "${lock.name}" (${lock.mode}, token ` +
      `${lock.weblocksToken}), client ${client}`);
    process.send('granted');
    await new Promise((r) => process.once('message', r));
    say(who, 'releasing');
  }).then(() => process.disconnect());
  say(who, `requested "printer" (pid ${process.pid})`);
  process.send('requested');
  return;
}

const { removeBucket } = require('../lib/index.js');
const next = (child) => new Promise((r) => child.once('message', r));
const show = async () => {
  const q = await navigator.locks.query();
  const fmt = (l) => l.map((i) => `${i.name}/${i.clientId.slice(0, 8)}`)
    .join(' ') || '-';
  say('parent', `query: held ${fmt(q.held)}; pending ${fmt(q.pending)}`);
};

(async () => {
  say('parent', `origin ${origin}`);
  const printer = fork(__filename, ['printer']);
  await next(printer);
  await next(printer); // granted
  const scanner = fork(__filename, ['scanner']);
  await next(scanner); // requested: queued behind the printer
  await show();
  say('parent', `kill -KILL ${printer.pid} (the printer, holding the lock)`);
  printer.kill('SIGKILL');
  await next(scanner); // granted once the printer is gone
  await show();
  scanner.send('done');
  await new Promise((r) => scanner.once('exit', r));
  await show();
  navigator.locks.close();
  removeBucket({ origin });
  say('parent', 'done; the bucket is removed');
})();
