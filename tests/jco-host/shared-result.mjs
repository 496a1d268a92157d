// The result of one exchange as the worker hands it to the blocked component thread: a
// SharedArrayBuffer of [state, meta length, body length, 0] as i32, then the meta JSON
// (status and content type, or an error tag and phase), then the body bytes.

/// The largest response body the host reads; more is `response-too-large`.
export const MAX_BODY = 1 << 20;
const HEADER = 16;
/// Room for the meta JSON. Its one backend-chosen part is the content type, which Node's
/// 16 KiB header cap bounds (a longer head is HPE_HEADER_OVERFLOW, `malformed-http`), so
/// this is four times that; writeResult still checks, as a Node run with a larger cap
/// could pass more.
const META = 1 << 16;

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
