// SPDX-License-Identifier: MIT
// errors.js - the exception a browser would raise for a library code.
'use strict';

const native = require('./native.js');

// The DOMException names the spec uses; wlk_error_name() gives these for
// the codes that have one.
const DOM_NAMES = new Set([
  'NotSupportedError', 'AbortError', 'InvalidStateError', 'SecurityError',
  'QuotaExceededError', 'TimeoutError',
]);

// fromCode(code) - a TypeError or DOMException for a negative code from the
// addon. Codes with no spec counterpart (a name longer than the bucket
// allows, a corrupt segment, an errno value) are plain Errors whose `code`
// is the library's symbol, such as 'WLK_ENAMETOOLONG' or 'ENOMEM'.
function fromCode(code) {
  const name = native.errorName(code);
  const message = native.strerror(code);
  if (name === 'TypeError') return new TypeError(message);
  if (DOM_NAMES.has(name)) return new DOMException(message, name);
  const e = new Error(message);
  e.code = name;
  return e;
}

function dom(name, message) {
  return new DOMException(message, name);
}

module.exports = { fromCode, dom };
