// A second host for the ahp-interceptor component: Node.js, through jco.
//
//   node host.mjs TRANSPILED.js REGISTRATION.json EVENT.json [EFFECTS]
//
// TRANSPILED.js is the output of `jco transpile ahp_interceptor.wasm --instantiation async`.
// Runs one hook call and prints {"decision","decidedBy","reason","audit"} as one JSON line
// (exit 0); a registration or event the component refuses prints the problems (exit 1).
//
// It implements every import the component has, as README "Hosting the component
// elsewhere" documents them: the monotonic clock, `credentials` (none and bearer-env) and
// `delivery` (HTTP only, plain http to loopback only, no retries, never interrupted;
// `sha256` by node:crypto).

import { createHash } from 'node:crypto';
import { Worker } from 'node:worker_threads';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { newResultBuffer, waitResult } from './shared-result.mjs';

const [transpiled, registrationPath, eventPath, effectsArg = 'deny'] = process.argv.slice(2);
if (!transpiled || !registrationPath || !eventPath) {
  console.error('usage: node host.mjs TRANSPILED.js REGISTRATION.json EVENT.json [EFFECTS]');
  process.exit(1);
}

/// Time past an exchange's deadline that the main thread waits for the worker's own
/// deadline-exceeded before it gives up on it.
const GRACE_MS = 20;

// The one monotonic clock: nanoseconds of process.hrtime, shared with the worker thread.
const now = () => process.hrtime.bigint();

/// An err(...) for a `result` import: jco returns the thrown object's payload.
function fail(variant) {
  throw { payload: variant };
}

/// What the component's plan says each backend is; filled after `load`.
const plans = new Map();

class Credential {
  #token;
  constructor(token) { this.#token = token; }
  authorization() { return `Bearer ${this.#token}`; }
}

const credentials = {
  Credential,
  acquire(backend, deadline) {
    if (now() >= deadline) fail({ tag: 'deadline-exceeded' });
    const auth = plans.get(backend)?.auth;
    if (auth === undefined) return undefined;
    if (auth.tag !== 'bearer-env') fail({ tag: 'unsupported' });
    const token = process.env[auth.val];
    if (!token) fail({ tag: 'unresolved' });
    return new Credential(token);
  },
  reject(_credential) {},
};

// Started and ready before any hook call, so no deadline pays for the worker's start-up.
const worker = new Worker(new URL('./exchange-worker.mjs', import.meta.url));
await once(worker, 'message');
worker.unref();

const delivery = {
  exchange(backend, message, credential, deadline) {
    const url = httpUrl(backend);
    if (url === undefined) fail({ tag: 'not-permitted' });
    if (now() >= deadline) fail({ tag: 'deadline-exceeded', val: 'connect' });
    const headers = credential ? { authorization: credential.authorization() } : {};
    const shared = newResultBuffer();
    worker.postMessage({ url, body: message, headers, deadline, shared });
    const waitMs = Math.max(0, Number(deadline - now()) / 1e6) + GRACE_MS;
    const result = waitResult(shared, waitMs);
    if (result === null) fail({ tag: 'deadline-exceeded', val: 'await-response' });
    const { meta, body } = result;
    if (meta.error) fail(meta.phase ? { tag: meta.error, val: meta.phase } : { tag: meta.error });
    return { status: meta.status, contentType: meta.contentType, body };
  },
  interrupted() { return false; },
  retryAfter(_backend, _attempt, _deadline) { return false; },
  sha256(message) { return createHash('sha256').update(message).digest('hex'); },
};

/// The backend's http(s) URL, if the plan has one this host may reach: https anywhere,
/// plain http only on loopback.
function httpUrl(backend) {
  const transport = plans.get(backend)?.transport;
  if (transport?.tag !== 'http') return undefined;
  const url = new URL(transport.val);
  if (url.protocol === 'https:') return url.href;
  const loopback = url.hostname === 'localhost' || url.hostname === '[::1]'
    || /^127\.\d+\.\d+\.\d+$/.test(url.hostname);
  return url.protocol === 'http:' && loopback ? url.href : undefined;
}

// The component imports only `now` of this interface.
const monotonicClock = { now };

const { instantiate } = await import(pathToFileURL(transpiled).href);
const dir = dirname(transpiled);
const exports = await instantiate(
  (path) => WebAssembly.compile(readFileSync(join(dir, path))),
  {
    'wasi:clocks/monotonic-clock': monotonicClock,
    'ahp:interceptor/credentials': credentials,
    'ahp:interceptor/delivery': delivery,
    'ahp:interceptor/host-types': {},
  },
);
const { Engine } = exports.interceptor;

function problems(error) {
  // Problems are `{path, rule}` records (`problem` in the WIT).
  return Array.isArray(error?.payload)
    ? error.payload.map((p) => `${p.path || '/'}: ${p.rule}`)
    : [String(error)];
}

let engine;
try {
  // This host declares everything the component can intercept (the capability handshake).
  engine = Engine.load(readFileSync(registrationPath, 'utf8'), Engine.interceptable());
} catch (error) {
  for (const problem of problems(error)) console.error(`error: ${problem}`);
  process.exit(1);
}
for (const plan of engine.plan()) plans.set(plan.id, plan);

try {
  const settled = engine.intercept(readFileSync(eventPath, 'utf8'), effectsArg.split(','), undefined, now());
  console.log(JSON.stringify({
    decision: settled.decision,
    decidedBy: settled.decidedBy,
    reason: settled.reason ?? null,
    audit: JSON.parse(settled.audit),
  }));
} catch (error) {
  for (const problem of problems(error)) console.error(`error: ${problem}`);
  process.exit(1);
}
