// A timer for an absolute instant of process.hrtime, the clock every deadline is on.

/// The longest delay a Node timer takes: a longer one is clamped to 1 ms (with a
/// TimeoutOverflowWarning), which would end a wait of 25 days or more at once.
const MAX_DELAY_MS = 2 ** 31 - 1;

/// Calls `fn` once `deadline` (nanoseconds of process.hrtime.bigint()) has passed, never
/// before: timers count whole milliseconds on a cached loop time and can fire a little
/// early, so each firing checks the clock and waits again for what is left, at most
/// MAX_DELAY_MS at a time. Always asynchronous. Returns a function that cancels it.
export function atDeadline(deadline, fn) {
  let timer;
  const wait = () => {
    const leftMs = Number(deadline - process.hrtime.bigint()) / 1e6;
    timer = setTimeout(check, Math.min(MAX_DELAY_MS, Math.max(0, Math.ceil(leftMs))));
  };
  const check = () => (process.hrtime.bigint() >= deadline ? fn() : wait());
  wait();
  return () => clearTimeout(timer);
}
