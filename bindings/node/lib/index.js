// SPDX-License-Identifier: MIT
// index.js - navigator.locks (W3C Web Locks) across processes.
//
// LockManager and Lock follow the spec's IDL and algorithms; the addon
// (src/) only queues requests in libweblocks and reports completions. This
// file does what a browser's bindings do: argument conversion (WebIDL),
// the validation steps of request() in the spec's order, the promises, and
// AbortSignal.
'use strict';

const native = require('./native.js');
const { fromCode, dom } = require('./errors.js');

const ABORTED = -3002; // WLK_EABORTED: our own cancel after an abort
const kCreate = Symbol('weblocks.create');

// Aborted requests of this thread that have not left their queue yet:
// wlk_async_cancel() takes the request out at the next dispatch. In the
// spec the abort steps run on the lock task queue before any query made
// after the abort, so query() waits for these first.
const cancelling = new Set();

// Lock (spec 3.3): name and mode; weblocksToken is this library's fencing
// token, a property a browser's Lock does not have.
class Lock {
  #name;
  #mode;
  #handle; // the addon's lock, for the token

  constructor(key, name, mode, handle) {
    if (key !== kCreate) throw new TypeError('Illegal constructor');
    this.#name = name;
    this.#mode = mode;
    this.#handle = handle;
  }

  get name() { return this.#name; }
  get mode() { return this.#mode; }

  // Extension: a BigInt greater than every earlier grant's of this name in
  // the bucket, for resources that must refuse a holder that lost its lock
  // (see wlk_lock_token() in weblocks.h).
  get weblocksToken() { return native.token(this.#handle); }

  get [Symbol.toStringTag]() { return 'Lock'; }
}

function deferred() {
  let resolve;
  const promise = new Promise((r) => { resolve = r; });
  return { promise, resolve };
}

// WebIDL DOMString conversion: ToString, which throws for a Symbol.
function domString(v) {
  return `${v}`;
}

// WebIDL conversion of a LockOptions dictionary: members in lexicographic
// order, then the extension (weblocksTimeout, milliseconds).
function lockOptions(v) {
  if (v === undefined || v === null) v = {};
  else if (typeof v !== 'object' && typeof v !== 'function') {
    throw new TypeError("Failed to execute 'request': " +
      "parameter 2 is not of type 'LockOptions'.");
  }
  const ifAvailable = Boolean(v.ifAvailable);
  let mode = v.mode;
  if (mode === undefined) mode = 'exclusive';
  else mode = domString(mode);
  if (mode !== 'exclusive' && mode !== 'shared') {
    throw new TypeError(`Failed to execute 'request': '${mode}' is not a ` +
      "valid enum value of type LockMode.");
  }
  const signal = v.signal;
  if (signal !== undefined && !(signal instanceof AbortSignal)) {
    throw new TypeError("Failed to execute 'request': member signal " +
      "is not of type AbortSignal.");
  }
  const steal = Boolean(v.steal);
  let timeout = v.weblocksTimeout;
  if (timeout !== undefined) {
    timeout = Number(timeout);
    if (!Number.isFinite(timeout) || timeout <= 0) {
      throw new TypeError('weblocksTimeout must be a positive number of ' +
        'milliseconds');
    }
  }
  return { ifAvailable, mode, signal, steal, timeout };
}

// An identifier passed to the library as a C string.
function identifier(what, v) {
  if (v === undefined || v === null) return undefined;
  const s = domString(v);
  if (s.includes('\0')) throw new TypeError(`${what} must not contain NUL`);
  return s;
}

class LockManager {
  #mgr = null;        // the addon's manager, null once closed
  #openError = null;  // why it could not be opened (SecurityError, ...)
  #requests = new Map(); // id -> request record, until granted
  #held = new Map();  // id -> request record of a granted lock
  #nextId = 1;

  // new LockManager({ origin, bucket, partition, clientId }): the lock
  // manager of that storage bucket. Managers of the same origin, bucket
  // and partition share their locks, across threads and processes.
  constructor(options) {
    if (options === undefined || options === null ||
        typeof options !== 'object') {
      throw new TypeError('LockManager: an options object with an origin ' +
        'is required');
    }
    const origin = identifier('origin', options.origin);
    if (origin === undefined || origin === '') {
      throw new TypeError('LockManager: origin is required');
    }
    const bucket = identifier('bucket', options.bucket);
    const partition = identifier('partition', options.partition);
    const clientId = identifier('clientId', options.clientId);
    const r = native.open(origin, bucket, partition, clientId,
      (id, status, lock) => this.#granted(id, status, lock),
      (id) => this.#stolen(id));
    if (typeof r === 'number') {
      const e = fromCode(r);
      // Argument errors are the caller's; a refusal (an opaque origin is
      // SecurityError) is what request() and query() report, as in the
      // spec's "obtain a lock manager" step.
      if (!(e instanceof DOMException)) throw e;
      this.#openError = e;
    } else {
      this.#mgr = r;
    }
  }

  request(name, ...rest) {
    let options, callback;
    try {
      // The WebIDL overloads: (name, callback), (name, options, callback).
      if (rest.length === 0) {
        throw new TypeError("Failed to execute 'request': " +
          '2 arguments required, but only ' + (arguments.length) +
          ' present.');
      }
      name = domString(name);
      if (rest.length === 1) {
        options = lockOptions(undefined);
        callback = rest[0];
      } else {
        options = lockOptions(rest[0]);
        callback = rest[1];
      }
      if (typeof callback !== 'function') {
        throw new TypeError("Failed to execute 'request': " +
          "parameter is not of type 'LockGrantedCallback'.");
      }
    } catch (e) {
      // A promise-returning operation rejects rather than throws.
      return Promise.reject(e);
    }
    return this.#request(name, options, callback);
  }

  // The request() method steps from step 3 on.
  #request(name, { ifAvailable, mode, signal, steal, timeout }, callback) {
    const fail = (name, msg) => Promise.reject(dom(name, msg));
    if (this.#mgr === null && this.#openError === null) {
      return fail('InvalidStateError', 'the lock manager was closed');
    }
    if (this.#openError) return Promise.reject(this.#openError);
    if (name.startsWith('-')) {
      return fail('NotSupportedError', "names starting with '-' are " +
        'reserved');
    }
    if (steal && ifAvailable) {
      return fail('NotSupportedError', 'steal and ifAvailable are ' +
        'mutually exclusive');
    }
    if (steal && mode !== 'exclusive') {
      return fail('NotSupportedError', 'steal requires exclusive mode');
    }
    if (signal && (steal || ifAvailable)) {
      return fail('NotSupportedError', 'signal cannot be used with steal ' +
        'or ifAvailable');
    }
    if (signal && signal.aborted) return Promise.reject(signal.reason);

    const id = this.#nextId++;
    const rec = { id, name, mode, callback, signal, onAbort: null,
      handle: null, settled: false, resolve: null, reject: null };
    const promise = new Promise((resolve, reject) => {
      rec.resolve = resolve;
      rec.reject = reject;
    });
    if (!steal) {
      // The uncontended path: granted now if grantable (the queue is
      // honoured), the callback still run later, from a microtask.
      const got = native.acquire(this.#mgr, name, mode === 'shared', id);
      if (typeof got === 'number') return Promise.reject(fromCode(got));
      if (got !== null || ifAvailable) {
        this.#requests.set(id, rec);
        queueMicrotask(() => this.#granted(id, 0, got, true));
        return promise;
      }
    }
    const r = native.request(this.#mgr, name, mode === 'shared',
      ifAvailable, steal, timeout ?? 0, id);
    if (typeof r === 'number') return Promise.reject(fromCode(r));
    rec.handle = r;
    this.#requests.set(id, rec);
    if (signal) {
      // "Signal to abort the request": reject now, leave the queue next.
      rec.onAbort = () => {
        this.#settle(rec, false, signal.reason);
        rec.cancelled = deferred();
        cancelling.add(rec.cancelled.promise);
        native.cancel(rec.handle);
      };
      signal.addEventListener('abort', rec.onAbort, { once: true });
    }
    return promise;
  }

  #settle(rec, ok, value) {
    if (rec.settled) return;
    rec.settled = true;
    if (ok) rec.resolve(value);
    else rec.reject(value);
  }

  // The addon completed request id: granted (lock), refused by
  // ifAvailable (status 0, no lock) or failed (status < 0). From the
  // addon this runs inside wlk_manager_dispatch(), where the manager must
  // not be closed, so the callback itself is run from a microtask, after
  // dispatch returns (inMicrotask: already there, on the uncontended path).
  #granted(id, status, lock, inMicrotask = false) {
    const rec = this.#requests.get(id);
    if (!rec) {
      if (lock) native.release(lock);
      return;
    }
    this.#requests.delete(id);
    if (rec.cancelled) {
      cancelling.delete(rec.cancelled.promise);
      rec.cancelled.resolve();
    }
    if (rec.onAbort) rec.signal.removeEventListener('abort', rec.onAbort);
    rec.handle = null;
    if (status !== 0) {
      if (status !== ABORTED || !rec.settled) {
        this.#settle(rec, false, fromCode(status));
      }
      return;
    }
    if (lock && this.#mgr === null) {
      // Closed between an uncontended grant and its microtask.
      native.release(lock);
      this.#settle(rec, false, dom('InvalidStateError',
        'the lock manager was closed'));
      return;
    }
    if (lock && rec.signal && rec.signal.aborted) {
      // Spec 4.4 step 14.1: aborted after the grant, before the callback.
      native.release(lock);
      this.#settle(rec, false, rec.signal.reason);
      return;
    }
    const obj = lock ? new Lock(kCreate, rec.name, rec.mode, lock) : null;
    if (lock) {
      rec.lock = lock;
      this.#held.set(id, rec);
    }
    if (inMicrotask) this.#invoke(rec, obj);
    else queueMicrotask(() => this.#invoke(rec, obj));
  }

  // Run the callback; the lock is held until its promise settles.
  #invoke(rec, obj) {
    let result;
    try {
      result = Promise.resolve(rec.callback.call(undefined, obj));
    } catch (e) {
      result = Promise.reject(e);
    }
    // The lock is held until the callback's promise settles; then the
    // released promise settles with the same outcome.
    result.then((v) => this.#done(rec, true, v),
      (e) => this.#done(rec, false, e));
  }

  #done(rec, ok, value) {
    if (rec.lock) {
      this.#held.delete(rec.id);
      native.release(rec.lock); // WLK_ESTOLEN if stolen: already told
      rec.lock = null;
    }
    this.#settle(rec, ok, value);
  }

  // A steal took the lock of request id: its released promise rejects
  // with AbortError (spec 4.1 step 3.4); the callback runs on.
  #stolen(id) {
    const rec = this.#held.get(id);
    if (rec) {
      this.#settle(rec, false, dom('AbortError', 'the lock was stolen'));
    }
  }

  query() {
    if (this.#openError) return Promise.reject(this.#openError);
    if (this.#mgr === null) {
      return Promise.reject(dom('InvalidStateError',
        'the lock manager was closed'));
    }
    if (cancelling.size > 0) {
      return Promise.all([...cancelling]).then(() => this.query());
    }
    const r = native.query(this.#mgr);
    if (typeof r === 'number') return Promise.reject(fromCode(r));
    return Promise.resolve(r);
  }

  // Extension (not in the spec; a browser's context ends with its
  // document): end this client. Its queued requests are dropped (their
  // promises reject with InvalidStateError), its locks released, and later
  // calls reject with InvalidStateError.
  close() {
    const mgr = this.#mgr;
    if (mgr === null) return;
    this.#mgr = null;
    native.close(mgr);
    // Closing released the locks; free their handles now, not when the
    // callbacks settle (which may be never), since each keeps the bucket
    // mapped.
    for (const rec of this.#held.values()) {
      native.release(rec.lock);
      rec.lock = null;
    }
    this.#held.clear();
  }

  // Extension: this manager's clientId, as query() reports it.
  get weblocksClientId() {
    return this.#mgr === null ? undefined : native.clientId(this.#mgr);
  }

  get [Symbol.toStringTag]() { return 'LockManager'; }
}

// removeBucket({ origin, bucket, partition }) - delete the bucket's shared
// memory segment (wlk_bucket_remove()). Refused (an Error with code
// 'EBUSY') while any process has the bucket open; 'ENOENT' if there is
// none. For tests and uninstallers.
function removeBucket(options) {
  const origin = identifier('origin', options && options.origin);
  if (!origin) throw new TypeError('removeBucket: origin is required');
  const rc = native.bucketRemove(origin,
    identifier('bucket', options.bucket),
    identifier('partition', options.partition));
  if (rc !== 0) throw fromCode(rc);
}

module.exports = {
  LockManager,
  Lock,
  removeBucket,
  version: native.version,
};
// Bound late: polyfill.js requires this module.
module.exports.install = (options) => require('./polyfill.js').install(options);
