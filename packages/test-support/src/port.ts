import { createServer } from 'node:net';
import type { TestContext } from 'node:test';
import { setTimeout as delay } from 'node:timers/promises';

/**
 * `listen()` on `port` again, which the test's coordinator has just given up (a restart): while
 * it was free, another process may have taken it for a moment (an outgoing connection's local port
 * comes from the range port 0 does, or a test file running beside this one listened on port 0).
 * No event says when such a holder lets go: a `listen` that fails with EADDRINUSE is tried again
 * every 100 ms, for up to a minute. `onBusy` is told of each refusal (a test makes the port free
 * again there).
 */
export async function onPortAgain<T>(port: number, listen: () => Promise<T>, onBusy?: () => void): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await listen();
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EADDRINUSE') throw err;
      if (attempt === 600) throw new Error(`port ${port} is still held by another process after a minute`, { cause: err });
      onBusy?.();
      await delay(100);
    }
  }
}

/**
 * A port on 127.0.0.1 held by a server of this process, as another process holds a port a
 * coordinator has just given up; `release` (an `onBusy` for onPortAgain) lets it go at the first
 * refusal, and `refusals` says how many there were. Closed when the test ends.
 */
export async function heldPort(t: TestContext): Promise<{ port: number; release: () => void; readonly refusals: number }> {
  const holder = createServer();
  await new Promise<void>((resolve) => holder.listen(0, '127.0.0.1', resolve));
  t.after(() => void (holder.listening && holder.close()));
  const { port } = holder.address() as { port: number };
  let refusals = 0;
  return {
    port,
    release: () => {
      if (refusals++ === 0) holder.close();
    },
    get refusals() {
      return refusals;
    },
  };
}
