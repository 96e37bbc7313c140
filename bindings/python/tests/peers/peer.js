// SPDX-License-Identifier: MIT
// peer.js - the Node peer of the peer protocol (PROTOCOL beside this file).
//
// Uses the Node bindings (bindings/node): const { LockManager } =
// require(PATH); new LockManager({ origin }), navigator.locks-shaped:
// locks.request(name, { mode }, lock => ...) and locks.query() giving
// { held, pending } of { name, mode, clientId }; the extensions
// locks.weblocksClientId and lock.weblocksToken. Usage:
//   node peer.js BINDINGS_PATH ORIGIN
'use strict';
const readline = require('readline');
const { LockManager } = require(process.argv[2]);

const locks = new LockManager({ origin: process.argv[3] });
const releases = new Map();
const say = (...words) => process.stdout.write(words.join(' ') + '\n');

async function clientId() {
  if (locks.weblocksClientId) return locks.weblocksClientId;
  // Without a clientId property: hold a private name and look it up.
  const name = `peer-id-${process.pid}`;
  return locks.request(name, async () => {
    const s = await locks.query();
    return s.held.find((e) => e.name === name).clientId;
  });
}

function acquire(name, mode) {
  locks.request(name, { mode }, (lock) => {
    say('granted', name, String(lock.weblocksToken ?? 0));
    return new Promise((resolve) => releases.set(name, resolve));
  }).then(() => say('released', name),
          (e) => say('error', e.name, e.message));
}

async function query() {
  const s = await locks.query();
  for (const e of s.held) say('held', e.name, e.mode, e.clientId);
  for (const e of s.pending) say('pending', e.name, e.mode, e.clientId);
  say('end');
}

(async () => {
  say('ready', await clientId(), String(process.pid));
  const rl = readline.createInterface({ input: process.stdin });
  for await (const line of rl) {
    const [cmd, a, b] = line.split(' ');
    if (cmd === 'acquire') acquire(a, b);
    else if (cmd === 'release') {
      const go = releases.get(a);
      releases.delete(a);
      if (go) go();
    } else if (cmd === 'query') await query();
    else if (cmd === 'exit') break;
    else say('error', 'TypeError', 'unknown command');
  }
  if (locks.close) locks.close();
  process.exit(0);
})();
