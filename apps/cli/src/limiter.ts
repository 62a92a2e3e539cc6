/**
 * At most `max` of the calls given to the function returned run at once; the others wait their
 * turn, in order. For commands that send many requests (a session tree, a cancel of many ids):
 * one connection each, all at once, would flood the coordinator and pass its MAX_CONNECTIONS.
 */
export function limiter(max: number): <T>(fn: () => Promise<T>) => Promise<T> {
  let active = 0;
  const queue: Array<() => void> = [];
  return async (fn) => {
    // a finished request hands its place straight to the next waiting one
    if (active >= max) await new Promise<void>((resolve) => queue.push(resolve));
    else active++;
    try {
      return await fn();
    } finally {
      const next = queue.shift();
      if (next) next();
      else active--;
    }
  };
}
