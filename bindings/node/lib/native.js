// SPDX-License-Identifier: MIT
// native.js - load the compiled addon (node-gyp's build/Release, or the
// directory named by WEBLOCKS_ADDON, e.g. for a build made elsewhere).
'use strict';

const path = require('node:path');

const candidates = [
  process.env.WEBLOCKS_ADDON,
  path.join(__dirname, '..', 'build', 'Release', 'weblocks.node'),
  path.join(__dirname, '..', 'build', 'Debug', 'weblocks.node'),
].filter(Boolean);

let lastError;
for (const file of candidates) {
  try {
    module.exports = require(file);
    lastError = undefined;
    break;
  } catch (e) {
    if (e.code !== 'MODULE_NOT_FOUND') throw e;
    lastError = e;
  }
}
if (lastError) {
  throw new Error('weblocks: the native addon is not built; run ' +
    '"npm run build" (see README.md)', { cause: lastError });
}
