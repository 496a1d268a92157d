// The I/O half of the JS host: one HTTP exchange per message, on a worker thread.
//
// The component's imports are synchronous, so the component's thread cannot await a
// response; it posts the exchange here, over the channel `component` (host.mjs starts
// this worker and hands each thread its end), and blocks in Atomics.wait on a
// SharedArrayBuffer that this worker fills. Every phase (connect, send, wait, body) is
// inside the one absolute deadline, an instant of process.hrtime (the same monotonic
// clock the component reads through wasi:clocks/monotonic-clock on its thread).

import { workerData } from 'node:worker_threads';
import http from 'node:http';
import https from 'node:https';
import { isIPv6 } from 'node:net';
import { atDeadline } from './deadline.mjs';
import { MAX_BODY, MAX_HEAD, writeResult } from './shared-result.mjs';

/// The most header fields a response may have: ahp-host's, hyper 1.x's default (h1
/// max_headers); one more is `malformed-http` there. Node reads up to 2000 and says
/// nothing.
const MAX_HEADERS = 100;

const { component } = workerData;
component.postMessage('ready');

component.on('message', ({ url, body, headers, deadline, shared }) => {
  let settled = false;
  const settle = (meta, bytes = new Uint8Array()) => {
    if (settled) return;
    settled = true;
    cancelTimer();
    writeResult(shared, meta, bytes);
  };
  let phase = 'connect';
  const cancelTimer = atDeadline(deadline, () => {
    settle({ error: 'deadline-exceeded', phase });
    request.destroy();
  });
  const target = new URL(url);
  // A link-local address (fe80::/10) names no interface in a URL (it has no zone): the
  // Rust host's socket does not take it (EINVAL), a refusal with nothing sent. Node's
  // libuv since 1.47 (Node 22) gives it the first interface with a link-local address
  // and connects there; refused here as there instead. (Only a literal: a name that
  // resolves to such an address is not looked at.)
  const literal = target.hostname.replace(/^\[(.*)\]$/, '$1');
  if (isIPv6(literal) && /^fe[89ab][0-9a-f]:/i.test(literal)) {
    settle({ error: 'connection-refused' });
    return;
  }
  let request;
  try {
    request = (target.protocol === 'https:' ? https : http).request(target, {
      method: 'POST',
      // As ahp-host asks: the body as it is, in no content coding (RFC 9110 §12.5.3).
      headers: {
        ...headers,
        'content-type': 'application/json',
        'content-length': body.length,
        'accept-encoding': 'identity',
      },
      agent: false,
      // Node's own default is 16 KiB: a head ahp-host reads would be `malformed-http`.
      maxHeaderSize: MAX_HEAD,
      // Set here, they win over what the harness's environment says
      // (NODE_TLS_REJECT_UNAUTHORIZED=0, NODE_OPTIONS=--insecure-http-parser): ahp-host
      // always verifies certificates and parses strictly, and a token or a reply must not
      // be trusted to a server because a proxy set-up turned either off.
      rejectUnauthorized: true,
      insecureHTTPParser: false,
    });
  } catch {
    // Node refuses a request it could not write (a header with a control character)
    // before sending anything; ahp-host refuses such a header as not-permitted (http.rs).
    // Uncaught, it would end this thread, and every later exchange wait out its deadline.
    settle({ error: 'not-permitted' });
    return;
  }
  const tls = target.protocol === 'https:';
  let connected = false;
  let secured = false;
  // Nothing is sent past the deadline, as in ahp-host (http.rs `send`): the request is
  // handed to Node only once the socket is up (over https, once the handshake is done),
  // and only if the deadline has not passed by then. Handed over with the request, it
  // went out as soon as the socket came up, which can be past the deadline, before its
  // timer (whole milliseconds, and late on a busy loop) fired. The socket is always a
  // fresh one (`agent: false`), so its `connect` always comes.
  const transmit = () => {
    if (process.hrtime.bigint() >= deadline) {
      settle({ error: 'deadline-exceeded', phase: 'connect' });
      request.destroy();
      return;
    }
    phase = 'send';
    request.end(body);
  };
  request.on('socket', (socket) => {
    socket.once('connect', () => {
      connected = true;
      if (!tls) transmit();
    });
    socket.once('secureConnect', () => {
      secured = true;
      transmit();
    });
  });
  // A response may start before the request is all out: its head moved the phase on.
  request.on('finish', () => { if (phase === 'send') phase = 'await-response'; });
  let answered = false;
  // Set once a reply's head has come whose status settles the call by itself.
  let cutShort = null;
  request.on('response', (response) => {
    answered = true;
    if (response.rawHeaders.length / 2 > MAX_HEADERS) {
      settle({ error: 'malformed-http' });
      request.destroy();
      return;
    }
    // A 200 in a coding it did not accept is no answer to it, as ahp-host has it: a
    // content coding but identity, a transfer coding but chunked (Node leaves either on
    // the bytes). Trimmed of spaces and tabs alone, as HTTP's whitespace is.
    const other = (name, plain) =>
      (response.headers[name] ?? '')
        .split(',')
        .map((c) => c.replace(/^[ \t]+|[ \t]+$/g, ''))
        .some((c) => c !== '' && c.toLowerCase() !== plain);
    if (response.statusCode === 200 && (other('content-encoding', 'identity') || other('transfer-encoding', 'chunked'))) {
      settle({ error: 'malformed-http' });
      request.destroy();
      return;
    }
    phase = 'read-response';
    const chunks = [];
    let length = 0;
    const reply = () => ({ status: response.statusCode, contentType: response.headers['content-type'] });
    // A body declared too large is not read, as the Rust host does not: at 200 the reply
    // is too large, at any other status but 202 it is that status with no body.
    const declared = Number(response.headers['content-length']);
    if (declared > MAX_BODY && response.statusCode !== 202) {
      if (response.statusCode === 200) {
        settle({ error: 'response-too-large' });
      } else {
        settle(reply(), Buffer.alloc(0));
      }
      request.destroy();
      return;
    }
    response.on('data', (chunk) => {
      if (length + chunk.length > MAX_BODY) {
        // Too large at 200 only: any other status is that status (a 503 is retried, a
        // 401 re-acquires), its body cut at the cap, as the Rust host reads it.
        if (response.statusCode === 200) {
          settle({ error: 'response-too-large' });
        } else {
          chunks.push(chunk.subarray(0, MAX_BODY - length));
          settle(reply(), Buffer.concat(chunks));
        }
        request.destroy();
        return;
      }
      length += chunk.length;
      chunks.push(chunk);
    });
    response.on('end', () => settle(reply(), Buffer.concat(chunks)));
    // A body cut short (the peer closed, or garbled its framing) leaves a status that
    // settles the call by itself (all but 200 and 202) as it is, with the bytes that
    // came, as the Rust host has it: a 401 still re-acquires, a 503 is still retried.
    if (response.statusCode !== 200 && response.statusCode !== 202) {
      cutShort = () => settle(reply(), Buffer.concat(chunks));
    }
    const lost = () => (cutShort ? cutShort() : settle({ error: 'connection-lost' }));
    response.on('aborted', lost);
    response.on('error', lost);
  });
  // A 101 goes to an `upgrade` listener only; without one Node drops the socket and
  // reports nothing, and the call would wait out its deadline. This client asks for no
  // upgrade: the reply is that status, as hyper gives it to the Rust host.
  request.on('upgrade', (response, socket) => {
    answered = true;
    socket.destroy();
    settle({ status: response.statusCode, contentType: response.headers['content-type'] }, Buffer.alloc(0));
  });
  request.on('error', (error) => {
    if (cutShort) {
      cutShort();
      return;
    }
    settle({ error: classify(error, connected, tls && !secured, answered) });
  });
});

/// Errors of a peer that went away.
const HANG_UPS = ['ECONNRESET', 'EPIPE', 'ECONNABORTED'];

/// The fatal alerts by which a peer's TLS layer refuses this client, as Node names
/// OpenSSL's reasons: the Rust host's (http.rs `refused_by_tls`), one for one. Any other
/// alert is a lost connection there, and here.
const TLS_REFUSALS = [
  'ERR_SSL_TLSV13_ALERT_CERTIFICATE_REQUIRED',
  'ERR_SSL_SSLV3_ALERT_BAD_CERTIFICATE',
  'ERR_SSL_SSLV3_ALERT_UNSUPPORTED_CERTIFICATE',
  'ERR_SSL_SSLV3_ALERT_CERTIFICATE_REVOKED',
  'ERR_SSL_SSLV3_ALERT_CERTIFICATE_EXPIRED',
  'ERR_SSL_SSLV3_ALERT_CERTIFICATE_UNKNOWN',
  'ERR_SSL_TLSV1_ALERT_UNKNOWN_CA',
  'ERR_SSL_TLSV1_ALERT_ACCESS_DENIED',
  'ERR_SSL_SSLV3_ALERT_HANDSHAKE_FAILURE',
];

/// A Node socket, TLS or parser error as a WIT delivery-error tag, as the Rust host
/// classifies it (http.rs `connect`, `connect_any`, `fresh_failure`). Until the socket
/// connected nothing was sent: a name that did not resolve is `unresolved-host`, whatever
/// else stopped the connection (refused, no route, an address the socket cannot take) a
/// refusal. In the TLS handshake nothing was sent either: a hang-up is a refusal,
/// anything else (a certificate, no common protocol) the TLS failure.
function classify(error, connected, handshaking, answered) {
  if (!connected) return error.syscall === 'getaddrinfo' ? 'unresolved-host' : 'connection-refused';
  if (handshaking) return HANG_UPS.includes(error.code) ? 'connection-refused' : 'tls-failed';
  // In TLS 1.3 the client's handshake ends before the server has checked its certificate:
  // a server that requires one (this host offers none) refuses only after, with an
  // alert, the request out or not, its application never having seen it. Every exchange
  // has a fresh connection (`agent: false`), so before a response this is the TLS
  // failure; after one, the request may have reached the backend.
  if (!answered && TLS_REFUSALS.includes(error.code)) return 'tls-failed';
  // Node reports a peer that closed before answering as ECONNRESET "socket hang up".
  if (error.code === 'ECONNRESET') {
    return error.message === 'socket hang up' ? 'connection-lost' : 'connection-reset';
  }
  if (typeof error.code === 'string' && error.code.startsWith('HPE_')) return 'malformed-http';
  if (typeof error.code === 'string' && error.code.startsWith('ERR_TLS')) return 'tls-failed';
  return 'connection-lost';
}
