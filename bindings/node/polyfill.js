// SPDX-License-Identifier: MIT
// require('weblocks/polyfill'): navigator.locks with the origin in
// WEBLOCKS_ORIGIN (see lib/polyfill.js).
'use strict';

require('./lib/polyfill.js').install();
