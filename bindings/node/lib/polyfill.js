// SPDX-License-Identifier: MIT
// polyfill.js - install navigator.locks for code written for browsers.
//
// require('weblocks/polyfill') installs it with the origin in the
// environment variable WEBLOCKS_ORIGIN (and, if set, WEBLOCKS_BUCKET and
// WEBLOCKS_PARTITION); it throws a TypeError if WEBLOCKS_ORIGIN is unset,
// since guessing an origin would silently share or split locks.
// require('weblocks').install({ origin, bucket, partition }) does the same
// with explicit values. Each thread (worker) that installs it gets its own
// manager: its own clientId, as each worker has in a browser.
'use strict';

const { LockManager } = require('./index.js');

function install(options) {
  const o = options ?? {
    origin: process.env.WEBLOCKS_ORIGIN,
    bucket: process.env.WEBLOCKS_BUCKET || undefined,
    partition: process.env.WEBLOCKS_PARTITION || undefined,
  };
  if (!o.origin) {
    throw new TypeError('weblocks: set WEBLOCKS_ORIGIN (such as ' +
      '"https://app.example") or call install({ origin })');
  }
  const locks = new LockManager(o);
  // Node 20 has no navigator; 21 and later have one, 24.5 and later with a
  // locks of its own (for the threads of one process), which this replaces.
  if (globalThis.navigator === undefined) {
    Object.defineProperty(globalThis, 'navigator', {
      value: {}, writable: true, configurable: true, enumerable: false,
    });
  }
  Object.defineProperty(globalThis.navigator, 'locks', {
    value: locks, writable: false, configurable: true, enumerable: true,
  });
  return locks;
}

module.exports = { install };
