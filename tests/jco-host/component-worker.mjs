// The component's thread of the JS host (host.mjs starts it): loads the component, runs
// the one hook call and posts the outcome to the main thread, which stays free to stop a
// call that does not come back.
//
// It implements every import the component has, as README "Hosting the component
// elsewhere" documents them: the monotonic clock, `credentials` (none and bearer-env) and
// `delivery` (HTTP only, plain http to loopback only, no retries, never interrupted;
// `sha256` by node:crypto). A plan with a backend outside that is refused (exit 1).

import { createHash } from 'node:crypto';
import { parentPort, workerData } from 'node:worker_threads';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { GENERIC_REASONS } from './reasons.mjs';
import { newResultBuffer, waitResult } from './shared-result.mjs';

const { transpiled, registration, event, effects, exchanges } = workerData;

/// Time past an exchange's deadline that this thread waits for the exchange worker's own
/// deadline-exceeded before it gives up on it.
const GRACE_MS = 20;

// The one monotonic clock: nanoseconds of process.hrtime, the same on every thread.
const now = () => process.hrtime.bigint();

/// An err(...) for a `result` import: jco returns the thrown object's payload.
function fail(variant) {
  throw { payload: variant };
}

/// What the component's plan says each backend is; filled after `load`.
const plans = new Map();

class Credential {
  #token;
  constructor(backend, token) {
    this.backend = backend;
    this.#token = token;
  }
  authorization() { return `Bearer ${this.#token}`; }
}

const credentials = {
  Credential,
  acquire(backend, deadline) {
    if (now() >= deadline) fail({ tag: 'deadline-exceeded' });
    const auth = plans.get(backend)?.auth;
    if (auth === undefined) return undefined;
    if (auth.tag !== 'bearer-env') fail({ tag: 'unsupported' });
    // As ahp-host reads a token (credentials.rs `usable`): trimmed of what Rust's `trim`
    // takes (White_Space: NEL too, a byte-order mark not), and non-empty visible ASCII,
    // or it is no token; one that cannot be an HTTP header must not reach one. Only a
    // string is a variable's value: an unset `constructor` or `toString` would be
    // Object.prototype's.
    const raw = Object.hasOwn(process.env, auth.val) ? process.env[auth.val] : undefined;
    const token =
      typeof raw === 'string' ? raw.replace(/^\p{White_Space}+|\p{White_Space}+$/gu, '') : '';
    if (!token || !/^[\x21-\x7e]+$/.test(token)) fail({ tag: 'unresolved' });
    return new Credential(backend, token);
  },
  reject(_credential) {},
};

// The exchange worker's channel (host.mjs starts that worker, and watches it): ready
// before any hook call, so no deadline pays for the worker's start-up.
await once(exchanges, 'message');
exchanges.unref();

const delivery = {
  exchange(backend, message, credential, deadline) {
    const url = httpUrl(backend);
    if (url === undefined) fail({ tag: 'not-permitted' });
    // A credential goes only to the backend it was acquired for, and a backend configured
    // with one never gets a request without it (fail-open is no unauthenticated fallback).
    if (credential && credential.backend !== backend) fail({ tag: 'not-permitted' });
    if (!credential && plans.get(backend).auth !== undefined) fail({ tag: 'not-permitted' });
    if (now() >= deadline) fail({ tag: 'deadline-exceeded', val: 'connect' });
    const headers = credential ? { authorization: credential.authorization() } : {};
    const shared = newResultBuffer();
    exchanges.postMessage({ url, body: message, headers, deadline, shared });
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
/// plain http only on loopback — `localhost` or a loopback address, IPv4-mapped ones
/// included (the URL parser has already written `127.1` or `[::ffff:127.0.0.1]` in its
/// canonical form). Unlike ahp-host, this host resolves no other name to see whether it
/// is loopback: such a URL is refused.
function httpUrl(backend) {
  const transport = plans.get(backend)?.transport;
  return transport?.tag === 'http' ? reachable(transport.val) : undefined;
}

/// `planned` as a URL this host may reach (see `httpUrl`), or undefined.
function reachable(planned) {
  let url;
  try { url = new URL(planned); } catch { return undefined; }
  if (url.protocol === 'https:') return url.href;
  const loopback = ['localhost', '[::1]'].includes(url.hostname)
    || /^127\.\d+\.\d+\.\d+$/.test(url.hostname)
    || /^\[::ffff:7f[0-9a-f]{2}:[0-9a-f]{1,4}\]$/.test(url.hostname);
  return url.protocol === 'http:' && loopback ? url.href : undefined;
}

// The component imports only `now` of this interface.
const monotonicClock = { now };

// From here the main thread bounds loading as ahp-host does (5 s from instantiation).
parentPort.postMessage({ loading: now() });
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

/// Loads the registration and runs the call; its settlement, as host.mjs prints it.
function run() {
  // This host declares everything the component can intercept (the capability handshake).
  const engine = Engine.load(registration, Engine.interceptable());
  const plan = engine.plan();
  checkPlan(plan);
  checkServed(plan);
  for (const backend of plan) plans.set(backend.id, backend);
  const started = now();
  // From here the main thread bounds the call by the component's bound-ms, as far as the
  // registration allows.
  parentPort.postMessage({ started, boundMs: registrationBound(engine.boundMs()) });
  const settled = engine.intercept(event, effects, undefined, started);
  // Past any honest record's length it is not read (settlement.rs `record_bound`).
  const honest = Buffer.byteLength(settled.audit) <= 2 * Buffer.byteLength(event) + (64 << 20);
  const audit = honest ? record(settled.audit) : undefined;
  if (!trusted(settled, audit)) return undefined;
  return {
    decision: settled.decision,
    decidedBy: settled.decidedBy,
    reason: settled.reason ?? null,
    audit,
  };
}

/// A registration that begins, after whitespace or a byte-order mark, as JSON does
/// (planned.rs `looks_like_json`; Rust's and JS's whitespace differ only in U+0085 and
/// U+FEFF).
const LOOKS_LIKE_JSON = /^[\s\u0085\ufeff]*[{[]/;

/// The registration as the checks below read it, once: `json` where it begins as a JSON
/// document does (only another build takes any other text), and then its `hooks` (those
/// of a document with none: none), undefined where it does not parse.
const READ = (() => {
  if (!LOOKS_LIKE_JSON.test(registration)) return { json: false };
  let document;
  try { document = JSON.parse(registration); } catch { return { json: true }; }
  return { json: true, hooks: Array.isArray(document?.hooks) ? document.hooks : [] };
})();

/// As ahp-host's `planned::bound_ms`: the component's `claimed` bound (a BigInt), but no
/// more than every subscription's `timeoutMs` in the registration adds up to, so another
/// build cannot claim forever and spin. A text that is not JSON is not read; one that
/// begins as JSON and does not parse has no timeouts.
function registrationBound(claimed) {
  if (!READ.json) return claimed;
  let ceiling = 0n;
  for (const hook of READ.hooks ?? []) {
    const subscriptions = Array.isArray(hook?.subscriptions) ? hook.subscriptions : [];
    for (const { timeoutMs } of subscriptions.filter((s) => s !== null && typeof s === 'object')) {
      if (typeof timeoutMs !== 'number' || !(timeoutMs > 0)) continue;
      ceiling += Number.isFinite(timeoutMs) ? BigInt(Math.ceil(timeoutMs)) : claimed;
    }
  }
  return claimed < ceiling ? claimed : ceiling;
}

/// A plan that says what the registration does not: this host serves none of it.
class PlanRefused extends Error {}

/// As ahp-host's `planned::check`: each planned backend is a hook of the registration with
/// that id, planned once, and each string it reaches out with is that hook's member at its
/// own place (the URL `transport.url`, a token variable `authentication.tokenEnv`, …), of
/// the hook's kinds of transport and binding and OAuth flow. A registration that does not
/// begin with `{` or `[` (only another build takes one): a string of its text; one that
/// does and does not parse refuses any plan.
function checkPlan(plan) {
  if (plan.length === 0) return;
  let hooks;
  if (READ.json) {
    if (READ.hooks === undefined) {
      throw new PlanRefused('the component planned backends for a registration the host cannot read as JSON');
    }
    hooks = new Map();
    for (const hook of READ.hooks) {
      if (typeof hook?.id !== 'string') continue;
      if (!hooks.has(hook.id)) hooks.set(hook.id, []);
      hooks.get(hook.id).push(hook);
    }
  }
  const seen = new Set();
  for (const backend of plan) {
    const named = `the component planned backend \`${backend.id}\``;
    if (seen.has(backend.id)) throw new PlanRefused(`${named} twice`);
    seen.add(backend.id);
    let wrong;
    if (hooks === undefined) {
      // A text no one here reads cannot say which backend a credential goes with, and
      // each string must stand whole in it (planned.rs `appears_whole`).
      wrong = backend.auth !== undefined
        ? 'credential'
        : words(backend).find(([, word]) => !appearsWhole(registration, word))?.[0];
    } else {
      const given = hooks.get(backend.id);
      if (given === undefined) throw new PlanRefused(`${named}, which the registration does not name`);
      // Where a registration repeats an id, the plan must be one of those hooks, whole.
      const mismatches = given.map((hook) => mismatch(backend, hook));
      wrong = mismatches.includes(undefined) ? undefined : mismatches[0];
    }
    if (wrong !== undefined) throw new PlanRefused(`${named}: its ${wrong} is not its registration's`);
  }
}

/// Refuses a plan with an interceptor this host could never reach: a stdio one, a URL
/// that is neither https nor plain http to loopback (see `httpUrl`), a credential other
/// than a bearer token from the environment. Served, it would fail on every call, and a
/// fail-open subscription would let every call through unasked; refused, the host exits
/// 1 as for any plan it does not serve, naming the backend and the field. A backend that
/// only observes is left alone: this host sends no notification (README), so it decides
/// nothing. Where the registration is no JSON document (only another build reads one),
/// every backend counts as an interceptor.
function checkServed(plan) {
  const intercepting = interceptorIds();
  for (const { id, transport, auth } of plan) {
    if (intercepting !== undefined && !intercepting.has(id)) continue;
    let field;
    if (transport.tag !== 'http') field = 'transport';
    else if (reachable(transport.val) === undefined) field = 'URL';
    else if (auth !== undefined && auth.tag !== 'bearer-env') field = 'authentication';
    if (field !== undefined) {
      throw new PlanRefused(`the component planned backend \`${id}\`: its ${field} is not one this host serves`);
    }
  }
}

/// The ids of the registration's hooks with an intercept subscription, or undefined where
/// the registration is no JSON document of hooks.
function interceptorIds() {
  if (READ.hooks === undefined) return undefined;
  const intercepts = (hook) => Array.isArray(hook?.subscriptions)
    && hook.subscriptions.some((subscription) => subscription?.mode === 'intercept');
  return new Set(READ.hooks.filter(intercepts).map((hook) => hook?.id));
}

/// The first field of `backend` whose planned value is not `hook`'s at that place
/// (planned.rs `mismatch`).
function mismatch({ transport, auth }, hook) {
  const given = hook?.transport ?? {};
  const binding = hook?.authentication ?? {};
  const checks = [];
  if (transport.tag === 'http') {
    checks.push(['transport', given.type === 'http'], ['URL', given.url === transport.val]);
  } else {
    const stdio = transport.val;
    checks.push(
      ['transport', given.type === 'stdio'],
      ['working directory', (typeof given.cwd === 'string' ? given.cwd : undefined) === stdio.cwd],
      ['command', commandGiven(stdio, given.command)],
      ['argument', sameStrings(given.args, stdio.args)],
    );
  }
  if (auth?.tag === 'bearer-env') {
    checks.push(['authentication', binding.type === 'bearer'], ['token variable', binding.tokenEnv === auth.val]);
  } else if (auth?.tag === 'bearer-ref') {
    checks.push(['authentication', binding.type === 'bearer'], ['token reference', binding.tokenRef === auth.val]);
  } else if (auth?.tag === 'oauth') {
    const oauth = auth.val;
    const secret = typeof binding.clientSecretRef === 'string' ? binding.clientSecretRef : undefined;
    checks.push(
      ['authentication', binding.type === 'oauth'],
      ['OAuth flow', binding.flow === FLOWS[oauth.flow]],
      ['OAuth issuer', binding.issuer === oauth.issuer],
      ['OAuth resource', binding.resource === oauth.resource],
      ['OAuth client', binding.clientId === oauth.clientId],
      ['OAuth scope', sameStrings(binding.scopes, oauth.scopes)],
      ['client secret reference', secret === oauth.clientSecretRef],
    );
  }
  return checks.find(([, ok]) => !ok)?.[0];
}

/// The registration's word for each OAuth flow of the plan (ahp_vocab `OAuthFlow`).
const FLOWS = { 'client-credentials': 'client_credentials', 'authorization-code-pkce': 'authorization_code_pkce' };

/// Whether the planned command is the hook's, or its relative one (a path with a `/`)
/// joined to its `cwd` (planned.rs `command_given`).
function commandGiven({ command, cwd }, given) {
  if (typeof given !== 'string') return false;
  if (cwd !== undefined && given.includes('/') && !given.startsWith('/')) {
    return command === `${cwd.replace(/\/+$/, '')}/${given}`;
  }
  return command === given;
}

/// Whether `value` is the list of strings `planned` (absent: none).
function sameStrings(value, planned) {
  if (value === undefined || value === null) return planned.length === 0;
  return Array.isArray(value) && value.length === planned.length
    && value.every((item, i) => item === planned[i]);
}

/// Whether `word` stands in `text` whole: neither a letter, digit or character a URL or
/// path goes on with right before it nor right after it (planned.rs `appears_whole`).
function appearsWhole(text, word) {
  // Rust's `char::is_alphanumeric`: Alphabetic or Numeric.
  const goesOn = (c) => c !== undefined && (/[\p{Alphabetic}\p{N}]/u.test(c) || '-._~/%:@?#&+!$*'.includes(c));
  if (word.length === 0) return false;
  for (let at = text.indexOf(word); at !== -1; at = text.indexOf(word, at + 1)) {
    const before = [...text.slice(Math.max(0, at - 2), at)].at(-1);
    const after = [...text.slice(at + word.length, at + word.length + 2)][0];
    if (!goesOn(before) && !goesOn(after)) return true;
  }
  return false;
}

/// Each string of a planned backend that says where to go, what to run or which secret to
/// read, with what it is (planned.rs `words`): what a registration that is not JSON must
/// hold as it is.
function words({ transport, auth }) {
  const found = [];
  if (transport.tag === 'http') found.push(['URL', transport.val]);
  else {
    found.push(['command', transport.val.command]);
    for (const arg of transport.val.args) found.push(['argument', arg]);
    if (transport.val.cwd !== undefined) found.push(['working directory', transport.val.cwd]);
  }
  if (auth?.tag === 'bearer-env') found.push(['token variable', auth.val]);
  else if (auth?.tag === 'bearer-ref') found.push(['token reference', auth.val]);
  else if (auth?.tag === 'oauth') {
    const oauth = auth.val;
    found.push(['OAuth issuer', oauth.issuer], ['OAuth resource', oauth.resource], ['OAuth client', oauth.clientId]);
    for (const scope of oauth.scopes) found.push(['OAuth scope', scope]);
    if (oauth.clientSecretRef !== undefined) found.push(['client secret reference', oauth.clientSecretRef]);
  }
  return found;
}

/// The audit text as a record, if it has a record's shape where the checks below read it
/// and every member ahp-host's record type requires of each interceptor and observer
/// entry (ahp_vocab `InterceptorEntry`, `ObserverEntry`), read as that type reads it,
/// and the members of what the decision hands on that the checks read; undefined
/// otherwise. Not checked: the members an entry may leave out, what is inside its
/// `failure` and `attempts`, and an injection's members.
function record(text) {
  let value;
  try { value = JSON.parse(text); } catch { return undefined; }
  const ok = !duplicated(text) && object(value) && object(value.event)
    && typeof value.decision === 'string' && typeof value.decidedBy === 'string'
    && (value.reason === undefined || value.reason === null || typeof value.reason === 'string')
    && count(value.elapsedMs)
    && list(shaped(INTERCEPTOR))(value.interceptors) && list(shaped(OBSERVER))(value.observers)
    // What `consistent` reads of what the decision hands on, typed as ahp-host reads it.
    && (value.flow == null || (object(value.flow) && oneOf(FLOWS_GIVEN)(value.flow.operation)))
    && (value.messages === undefined || list(string)(value.messages))
    && (value.effective === undefined || object(value.effective))
    && (value.injections === undefined || Array.isArray(value.injections));
  return ok ? value : undefined;
}

/// Whether JSON `text`, which JSON.parse has read (so well-formed), names a member twice
/// in one object, at any depth, as its names read once unescaped (`"decisio\u006e"` is
/// `"decision"`). JSON.parse keeps the last of the two, so `"decision":"deny"` followed
/// by `"decision":"allow"` would read as an allow; ahp-host's record type refuses a
/// member given twice, and the call is an engine failure. Its untyped members (`effective`,
/// `returned`) keep the last there: refused here too, as the component writes none twice.
function duplicated(text) {
  // Per open object, the names read so far; per open array, null.
  const open = [];
  // Whether the next string is a member's name: after `{`, or `,` in an object.
  let naming = false;
  for (let at = 0; at < text.length; at += 1) {
    const c = text[at];
    if (c === '"') {
      let end = at + 1;
      while (text[end] !== '"') end += text[end] === '\\' ? 2 : 1;
      if (naming) {
        const names = open.at(-1);
        const name = JSON.parse(text.slice(at, end + 1));
        if (names.has(name)) return true;
        names.add(name);
        naming = false;
      }
      at = end;
    } else if (c === '{') {
      open.push(new Set());
      naming = true;
    } else if (c === '[') {
      open.push(null);
    } else if (c === '}' || c === ']') {
      open.pop();
      naming = false;
    } else if (c === ',') {
      naming = open.at(-1) !== null;
    }
  }
  return false;
}

/// Every flow operation a record may hand on (ahp_vocab `FlowOperation`).
const FLOWS_GIVEN = ['stop', 'continue'];

/// The decision each `decidedBy` settles as (ahp_vocab `DecidedBy::decision`).
const DECIDES = { 'no-objection': 'allow', 'backend-ask': 'ask' };

/// Every interceptor outcome (ahp_vocab `Outcome`): a record with another word is no record.
const OUTCOMES = ['no-effect', 'allow', 'ask', 'deny', 'stop', 'failed-open', 'failed-closed',
  'not-reached', 'interrupted', 'budget-expired'];

const object = (v) => typeof v === 'object' && v !== null && !Array.isArray(v);
const string = (v) => typeof v === 'string';
/// A u64 or usize of the record's type. JSON.parse reads one past 2^53 inexactly, but as
/// a whole number still: a timeout may be as long as u64::MAX ms.
const count = (v) => Number.isInteger(v) && v >= 0;
const oneOf = (words) => (v) => words.includes(v);
const list = (check) => (v) => Array.isArray(v) && v.every(check);

/// An object with each of `members`, each as its check says.
const shaped = (members) => (v) => object(v)
  && Object.entries(members).every(([name, check]) => check(v[name]));

/// The members an interceptor entry must have.
const INTERCEPTOR = {
  backend: string,
  subscription: count,
  policy: oneOf(['fail-open', 'fail-closed']),
  timeoutMs: count,
  outcome: oneOf(OUTCOMES),
  attempts: list(object),
};

/// The members an observer entry must have (`requestSha256` is checked by `listed`).
const OBSERVER = {
  backend: string,
  subscription: count,
  kind: oneOf(['short-circuit', 'owned', 'hook-failure']),
};

/// Interceptor outcomes that end the chain at or before them: a denial (ahp_vocab
/// `Outcome::denies`), or never reached, which only follows one (settlement.rs `stopped`).
const STOPPED = ['deny', 'stop', 'failed-closed', 'interrupted', 'budget-expired', 'not-reached'];

/// Interceptor outcomes that record a failure, and the only ones that do.
const FAILED = ['failed-open', 'failed-closed', 'budget-expired'];

/// Whether a record's interceptors let its decision stand (settlement.rs `consistent`):
/// each failure settled by its own policy (failed open only under fail-open, closed only
/// under fail-closed); a denial it credits to an interceptor has one to show for it
/// (`backend-deny`: one denied or stopped the flow; `synthetic-deny`: one failed
/// closed); a denial nobody explained carries its generic reason; and for an allow or an
/// ask, none stopped, and a backend asked exactly when the decision is `ask`.
function consistent(audit, decision) {
  const outcomes = audit.interceptors.map((i) => i.outcome);
  const asked = outcomes.includes('ask');
  const byPolicy = audit.interceptors.every((i) => (i.outcome !== 'failed-open' || i.policy === 'fail-open')
    && (i.outcome !== 'failed-closed' || i.policy === 'fail-closed'));
  // A failure is recorded exactly where an interceptor failed.
  const failuresRecorded = audit.interceptors.every((i) => (i.failure != null) === FAILED.includes(i.outcome));
  const credited = (audit.decidedBy !== 'backend-deny' || outcomes.includes('deny') || outcomes.includes('stop'))
    && (audit.decidedBy !== 'synthetic-deny' || outcomes.includes('failed-closed'));
  const generic = !(audit.decidedBy in GENERIC_REASONS)
    || audit.reason === GENERIC_REASONS[audit.decidedBy];
  const stopped = outcomes.some((outcome) => STOPPED.includes(outcome));
  // What a denial hands on: no supplied result, effective value or continue; an
  // interrupted or expired call nothing it staged (as ahp-host reads the members: a
  // `returned` there, null too, is one; empty lists and maps are none).
  const none = (value) => value == null || Object.keys(value).length === 0;
  // An accepted stop settles as a denial: an allow or an ask carrying one has gone wrong.
  const handsOn = !['interrupted', 'budget-expired'].includes(audit.decidedBy)
    ? (decision !== 'deny' ? audit.flow?.operation !== 'stop'
      : !('returned' in audit) && none(audit.effective) && audit.flow?.operation !== 'continue')
    : !('returned' in audit) && none(audit.effective) && none(audit.injections)
      && audit.flow == null && none(audit.messages);
  // What it hands on beside the decision came from an interceptor whose accepted effects
  // say so: a component's own words must never read as a backend's.
  const fromABackend = (kind) => audit.interceptors.some((i) => Array.isArray(i.effects)
    && i.effects.includes(kind));
  const handedOnByBackends = (none(audit.effective) || fromABackend('modify'))
    && (!('returned' in audit) || fromABackend('return'))
    && (none(audit.injections) || fromABackend('inject'))
    && (audit.flow == null || fromABackend('flow'))
    && (none(audit.messages) || fromABackend('message'));
  return byPolicy && failuresRecorded && credited && generic && handsOn && handedOnByBackends
    && (decision === 'deny'
    || (decision === 'allow' && !asked && !stopped)
    || (decision === 'ask' && asked && !stopped));
}

/// Whether the component's settlement can be trusted, as ahp-host decides it
/// (settlement.rs `from_component`): its record agrees with the WIT fields and with itself,
/// and lists exactly the observe deliveries asked for (or withheld). A component that
/// says "allow" over its own denial has gone wrong, and its mistake must never be
/// permission.
function trusted(settled, audit) {
  if (audit === undefined) return false;
  const decision = DECIDES[audit.decidedBy] ?? 'deny';
  const deliveries = settled.observers;
  return audit.decision === settled.decision
    && audit.decidedBy === settled.decidedBy
    && (audit.reason ?? null) === (settled.reason ?? null)
    && decision === audit.decision
    && consistent(audit, decision)
    && placed(audit)
    && audit.observers.length === deliveries.length
    && audit.observers.every((entry, n) => entry.backend === deliveries[n].backend
      && listed(entry, deliveries[n].message));
}

/// Whether each observer entry stands at a place of its own, at a subscription its
/// backend's hook has where the registration says, reporting a failure the record lists
/// (settlement.rs `placed`): otherwise how many notifications go out, and where, is the
/// component's to choose.
function placed(audit) {
  const counts = subscriptionCounts();
  const places = new Set();
  return audit.observers.every((entry) => {
    const { backend, subscription, kind, reports } = entry;
    const place = JSON.stringify([backend, subscription, kind, reports ?? null]);
    const own = !places.has(place);
    places.add(place);
    const hookHasIt = counts === undefined
      || (counts.has(entry.backend) && entry.subscription < counts.get(entry.backend));
    const reportsAFailure = entry.reports == null
      || audit.interceptors[entry.reports]?.failure != null;
    return own && hookHasIt && reportsAFailure;
  });
}

/// How many subscriptions each backend id's hook has, the most where an id is repeated
/// (planned.rs `subscription_counts`); undefined for a registration that is no JSON
/// document of hooks.
function subscriptionCounts() {
  if (!LOOKS_LIKE_JSON.test(registration)) return undefined;
  let document;
  try { document = JSON.parse(registration); } catch { return undefined; }
  const counts = new Map();
  for (const hook of Array.isArray(document?.hooks) ? document.hooks : []) {
    if (typeof hook?.id !== 'string') continue;
    const count = Array.isArray(hook.subscriptions) ? hook.subscriptions.length : 0;
    counts.set(hook.id, Math.max(counts.get(hook.id) ?? 0, count));
  }
  return counts;
}

/// Whether an observer entry names its delivery's `message`: by digest, or, the one
/// result the component sets, as withheld with no bytes handed over and no digest
/// (settlement.rs `lists`).
function listed(entry, message) {
  if (entry.result === undefined) {
    return message.length > 0 && entry.requestSha256 === delivery.sha256(message);
  }
  // Absent, or null as ahp-host's record type reads it.
  return entry.result === 'withheld' && message.length === 0 && entry.requestSha256 == null;
}

try {
  const settled = run();
  // An untrusted settlement is the main thread's engine-failure denial.
  parentPort.postMessage(settled ? { settled } : { untrusted: true });
} catch (error) {
  // A plan this host does not serve is a setup failure, as in ahp-host: exit 1.
  if (error instanceof PlanRefused) parentPort.postMessage({ refused: [error.message] });
  else {
    // The component's own refusal of the registration or event is an err with its
    // problems, `{path, rule}` records. Anything else (a trap, a record that does not
    // parse, a host bug) goes on to the main thread, which denies it as engine-failure.
    if (!Array.isArray(error?.payload)) throw error;
    parentPort.postMessage({ refused: error.payload.map((p) => `${p.path || '/'}: ${p.rule}`) });
  }
}
