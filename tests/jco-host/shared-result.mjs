// The result of one exchange as the worker hands it to the blocked component thread: a
// SharedArrayBuffer of [state, meta length, body length, 0] as i32, then the meta JSON
// (status and content type, or an error tag and phase), then the body bytes.

/// The largest response body the host reads; more is `response-too-large`.
export const MAX_BODY = 1 << 20;
/// The largest response head the host reads: ahp-host's, hyper 1.x's default read buffer
/// (8192 + 4096 * 100 bytes), past which a head is `malformed-http`. Node, given it as
/// maxHeaderSize, counts a head without its line ends and separators, and hyper
/// counts the bytes it has buffered: the two agree to within a few bytes a line.
export const MAX_HEAD = 8192 + 4096 * 100;
const HEADER = 16;
/// Room for the meta JSON. Its one backend-chosen part is the content type, at most the
/// head, which JSON writes in at most two bytes a character (a Latin-1 character as
/// UTF-8, an escaped `"` or `\`); the rest is a few dozen bytes. writeResult still checks.
const META = 2 * MAX_HEAD + 1024;

export function newResultBuffer() {
  return new SharedArrayBuffer(HEADER + META + MAX_BODY);
}

export function writeResult(shared, meta, body) {
  const header = new Int32Array(shared, 0, 4);
  let metaBytes = new TextEncoder().encode(JSON.stringify(meta));
  // Past its room the meta would run into the body: a head larger than the host reads,
  // as Node itself classifies one.
  if (metaBytes.length > META) {
    metaBytes = new TextEncoder().encode(JSON.stringify({ error: 'malformed-http' }));
    body = new Uint8Array();
  }
  const bytes = new Uint8Array(shared, HEADER);
  bytes.set(metaBytes, 0);
  bytes.set(body, META);
  header[1] = metaBytes.length;
  header[2] = body.length;
  Atomics.store(header, 0, 1);
  Atomics.notify(header, 0);
}

/// Blocks until the worker wrote a result or `waitMs` passed; null on timeout.
export function waitResult(shared, waitMs) {
  const header = new Int32Array(shared, 0, 4);
  Atomics.wait(header, 0, 0, waitMs);
  if (Atomics.load(header, 0) !== 1) return null;
  const bytes = new Uint8Array(shared, HEADER);
  const meta = JSON.parse(new TextDecoder().decode(bytes.slice(0, header[1])));
  return { meta, body: bytes.slice(META, META + header[2]) };
}
