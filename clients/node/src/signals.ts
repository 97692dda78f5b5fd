// One 'abort' listener per AbortSignal, however many waits share it. Node warns
// (MaxListenersExceededWarning) past ten listeners on one EventTarget, and one signal shared by
// many waits (`AbortSignal.timeout(...)` for a batch of acquires, a shutdown signal) is the
// ordinary case. The listener goes when its last wait ends, so nothing stays on the caller's signal.

const waiting = new WeakMap<AbortSignal, { listener: () => void; calls: Set<() => void> }>();

/** Calls `fn` once when `signal` aborts (at once, in a microtask, if it has); returns the call that stops that. */
export function onAbort(signal: AbortSignal, fn: () => void): () => void {
  if (signal.aborted) {
    let off = false;
    queueMicrotask(() => {
      if (!off) fn();
    });
    return () => {
      off = true;
    };
  }
  let entry = waiting.get(signal);
  if (!entry) {
    const calls = new Set<() => void>();
    const listener = () => {
      waiting.delete(signal);
      for (const call of [...calls]) call();
    };
    entry = { listener, calls };
    waiting.set(signal, entry);
    signal.addEventListener("abort", listener, { once: true });
  }
  const { calls, listener } = entry;
  // Each registration its own function, so one fn registered twice is two registrations.
  const call = () => fn();
  calls.add(call);
  return () => {
    if (!calls.delete(call) || calls.size > 0) return;
    if (waiting.get(signal)?.calls === calls) {
      waiting.delete(signal);
      signal.removeEventListener("abort", listener);
    }
  };
}

/** Sleeps `ms`, ended early when `signal` aborts. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise<void>((resolve) => {
    let off = () => {};
    const t = setTimeout(() => {
      off();
      resolve();
    }, ms);
    if (signal) {
      off = onAbort(signal, () => {
        clearTimeout(t);
        resolve();
      });
    }
  });
}
