/**
 * The first-in, first-out list of pending waiters that both waiting mechanisms keep: the
 * {@link WaitQueue} of the windows and `allOf` (wait.ts) and the buckets' ledger
 * (algorithms/bucket-ledger.ts). A doubly linked list through the waiters themselves (no allocation
 * per waiter beyond its abort listener), with each waiter's abort listener added on `push` and
 * removed on `remove`. What a waiter waits for, and when it is served, is the owner's.
 *
 * The waiters that share one `AbortSignal` share one listener on it (see {@link listen}): a signal
 * given to many waits (a shutdown signal, a request's) set off Node's MaxListenersExceededWarning
 * at the eleventh, though nothing leaked. @module
 */

/** The waiters' abort callbacks on one signal, in the order they were added, and its one listener. */
interface Listeners {
  readonly callbacks: Set<() => void>;
  readonly listener: () => void;
}

/** Every signal some waiter listens to. Weak: a signal no one holds goes with its entry. */
const bySignal = new WeakMap<AbortSignal, Listeners>();

/** Calls `callback` when `signal` aborts, through one listener per signal. @internal */
export function listen(signal: AbortSignal, callback: () => void): void {
  let entry = bySignal.get(signal);
  if (entry === undefined) {
    const callbacks = new Set<() => void>();
    const listener = () => {
      bySignal.delete(signal);
      for (const run of [...callbacks]) run();
    };
    entry = { callbacks, listener };
    bySignal.set(signal, entry);
    signal.addEventListener("abort", listener, { once: true });
  }
  entry.callbacks.add(callback);
}

/** Stops calling `callback` for `signal`; the listener goes with the last callback. @internal */
export function unlisten(signal: AbortSignal, callback: () => void): void {
  const entry = bySignal.get(signal);
  if (entry === undefined || !entry.callbacks.delete(callback)) return;
  if (entry.callbacks.size === 0) {
    bySignal.delete(signal);
    signal.removeEventListener("abort", entry.listener);
  }
}

/**
 * A waiter a {@link WaitList} links. The list owns `prev`, `next`, `queued` and `onAbort`:
 * the owner reads them (`next` to walk the list from its head) and never writes them.
 */
export interface WaitListNode<N> {
  prev: N | undefined;
  next: N | undefined;
  /** True while in the list; false once removed (granted, rejected, aborted, withdrawn). */
  queued: boolean;
  /** The waiter's `AbortSignal`, listened to while it is in the list. */
  readonly signal: AbortSignal | undefined;
  /** The abort listener added on `push`, while the waiter is in the list. */
  onAbort: (() => void) | undefined;
}

/**
 * Waiters in arrival order. Walk it with `for (let n = list.head; n !== undefined; n = next)`,
 * reading `next` before removing `n`. @internal
 */
export class WaitList<N extends WaitListNode<N>> {
  /** @internal */
  private first: N | undefined;
  /** @internal */
  private last: N | undefined;
  /** @internal */
  private count = 0;

  /**
   * @param aborted Called, once, when a queued waiter's signal aborts, with the signal's
   *   reason; the waiter is still in the list (the owner removes it and settles it).
   */
  constructor(private readonly aborted: (node: N, reason: unknown) => void) {}

  /** The oldest waiter; `undefined` when the list is empty. */
  get head(): N | undefined {
    return this.first;
  }

  /** The newest waiter; `undefined` when the list is empty. */
  get tail(): N | undefined {
    return this.last;
  }

  /** Number of waiters in the list. */
  get size(): number {
    return this.count;
  }

  /**
   * Appends `node` (not in any list) and, when it has a signal, listens for its abort.
   * The signal is not checked here: the owner rejects an already aborted one beforehand.
   */
  push(node: N): void {
    const signal = node.signal;
    if (signal !== undefined) {
      node.onAbort = () => {
        if (node.queued) this.aborted(node, signal.reason);
      };
      listen(signal, node.onAbort);
    }
    node.prev = this.last;
    node.next = undefined;
    node.queued = true;
    if (this.last === undefined) this.first = node;
    else this.last.next = node;
    this.last = node;
    this.count++;
  }

  /** Unlinks a queued `node` and stops listening to its signal. */
  remove(node: N): void {
    node.queued = false;
    if (node.prev === undefined) this.first = node.next;
    else node.prev.next = node.next;
    if (node.next === undefined) this.last = node.prev;
    else node.next.prev = node.prev;
    node.prev = undefined;
    node.next = undefined;
    this.count--;
    if (node.onAbort !== undefined && node.signal !== undefined) {
      unlisten(node.signal, node.onAbort);
    }
  }
}
