// A second host for the ahp-interceptor component: Node.js, through jco.
//
//   node host.mjs TRANSPILED.js REGISTRATION.json EVENT.json [EFFECTS]
//
// TRANSPILED.js is the output of `jco transpile ahp_interceptor.wasm --instantiation async`.
// Runs one hook call and prints {"decision","decidedBy","reason","audit"} as one JSON line,
// exiting as `ahp intercept` does: 0 allow, 2 deny, 3 ask. A registration or event the
// component refuses prints the problems (exit 1).
//
// The component runs on a worker thread (component-worker.mjs, with the imports), as its
// calls block: this thread stays free to end a call that traps, throws or runs past the
// component's bound-ms, and denies it as `engine-failure`, never an allow.

import { MessageChannel, Worker } from 'node:worker_threads';
import { readFileSync } from 'node:fs';
import { atDeadline } from './deadline.mjs';
import { GENERIC_REASONS } from './reasons.mjs';

const [transpiled, registrationPath, eventPath, effectsArg = 'deny'] = process.argv.slice(2);
if (!transpiled || !registrationPath || !eventPath) {
  console.error('usage: node host.mjs TRANSPILED.js REGISTRATION.json EVENT.json [EFFECTS]');
  process.exit(1);
}
const begun = process.hrtime.bigint();
const event = readFileSync(eventPath, 'utf8');

/// Time the call gets past its bound-ms to settle and return: ahp-host's (pool.rs GRACE),
/// so that a loaded machine's late but honest settlement is not cut off.
const GRACE_NS = 250_000_000n;

/// Time the call gets past its bound-ms to prepare its observe notifications: ahp-host's
/// (pool.rs PREPARE, four times ahp_vocab OBSERVER_PREPARE_MS).
const PREPARE_NS = 1_000_000_000n;

/// Instantiating the component and loading the registration: ahp-host bounds them at
/// 5 s (runtime.rs `bound_cpu`), so a component that spins there is stopped too.
const LOAD_NS = 5_000_000_000n;

const EXIT_CODES = { allow: 0, deny: 2, ask: 3 };

/// Prints the settlement as one line and exits with its decision's code, once the line is
/// out: `console.log` then `process.exit` loses what a pipe has not taken yet (past 64
/// KiB: a long deny reason, which the line carries twice). Only the first call prints.
let printing = false;
function print(settled) {
  if (printing) return;
  printing = true;
  process.stdout.write(`${JSON.stringify(settled)}\n`, () => process.exit(EXIT_CODES[settled.decision]));
}

/// The denial for a call that did not complete, its record the one `ahp intercept`
/// prints for an engine failure (`Record::host_denial`).
function engineFailure(why) {
  hostDenial('engine-failure', why);
}

/// A denial this host settles itself, as `Record::host_denial` writes it.
function hostDenial(decidedBy, why) {
  // An answer on its way out stands (the component thread ending after it, a signal).
  if (printing) return;
  console.error(`error: ${why}`);
  const reason = GENERIC_REASONS[decidedBy];
  const elapsedMs = Number((process.hrtime.bigint() - begun) / 1_000_000n);
  const audit = {
    event: eventRef(event),
    decision: 'deny',
    decidedBy,
    reason,
    elapsedMs,
    interceptors: [],
    observers: [],
  };
  print({ decision: 'deny', decidedBy, reason, audit });
}

// A signal ends the call as it ends `ahp intercept` (cli.rs): a denial, `interrupted`.
// Left to Node, the process would die with nothing printed, which a harness reads as a
// crash and lets pass. The component is not told (`interrupted()` stays false): it may
// be blocked in an exchange, and its answer is not waited for.
for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP', 'SIGQUIT']) {
  process.on(signal, () => hostDenial('interrupted', `interrupted by ${signal}`));
}

/// As much identity as the event text gives, read as `EventRef::read` reads it.
function eventRef(text) {
  let value = null;
  try { value = JSON.parse(text); } catch { /* not JSON: no identity */ }
  const string = (v) => (typeof v === 'string' ? v : null);
  return {
    id: string(value?.id),
    type: string(value?.type),
    session: string(value?.session?.id),
    call: string(value?.call?.id),
  };
}

// The thread that does the component's HTTP exchanges (exchange-worker.mjs) is started
// and watched here, not by the component thread that uses it: that thread is blocked
// through the whole call (in the component, or in Atomics.wait for an exchange), so it
// would never see this one die, and every exchange from then on would wait out its
// deadline and be settled by policy, an allow under fail-open. Here its death ends the
// call as an engine failure. The two threads talk over a channel of their own.
const channel = new MessageChannel();
const exchanger = new Worker(new URL('./exchange-worker.mjs', import.meta.url), {
  workerData: { component: channel.port1 },
  transferList: [channel.port1],
});
exchanger.unref();
exchanger.on('error', (error) => engineFailure(error));
// Of itself it ends only once the component thread has ended (their channel closed),
// with 0; an uncaught exception or running out of memory ends it with 1.
exchanger.on('exit', (code) => {
  if (code !== 0) engineFailure(`the exchange thread ended with ${code}`);
});

const component = new Worker(new URL('./component-worker.mjs', import.meta.url), {
  workerData: {
    transpiled,
    registration: readFileSync(registrationPath, 'utf8'),
    event,
    effects: effectsArg.split(','),
    exchanges: channel.port2,
  },
  transferList: [channel.port2],
});
let cancelLoadBound = () => {};
component.on('message', (message) => {
  if (message.loading !== undefined) {
    cancelLoadBound = atDeadline(message.loading + LOAD_NS + GRACE_NS, () =>
      engineFailure('loading the component and the registration took longer than 5 s'));
  } else if (message.settled) {
    print(message.settled);
  } else if (message.untrusted) {
    engineFailure('the component\'s settlement record is unreadable or inconsistent');
  } else if (message.refused) {
    // A denial already on its way out (a signal, the load bound) stands: exit 1 in its
    // place would be an error a wrapper may not read as a block.
    if (printing) return;
    for (const problem of message.refused) console.error(`error: ${problem}`);
    process.exit(1);
  } else {
    // The call began at `started`: bound it as ahp-host does, by bound-ms, the time to
    // prepare observers and a grace.
    cancelLoadBound();
    const limit = message.started + message.boundMs * 1_000_000n + PREPARE_NS + GRACE_NS;
    atDeadline(limit, () => engineFailure(`the call ran past its bound of ${message.boundMs} ms`));
  }
});
// An exception out of the component thread: a trap, or anything else but a refusal.
component.on('error', (error) => engineFailure(error));
component.on('exit', () => engineFailure('the component thread ended without a settlement'));
