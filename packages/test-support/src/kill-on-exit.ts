import type { ChildProcess } from 'node:child_process';

const children = new Map<ChildProcess, NodeJS.Signals>();
let hooked = false;

/**
 * Send `child` `signal` (SIGKILL unless told) when this test process ends, also when its
 * after-hooks never ran: the test runner ends a file that ran out of time with SIGTERM, and a
 * coordinator or launcher left behind runs (polls, keeps its executors) for ever.
 *
 * A child that spawns process groups of its own is given the signal it turns into ending them:
 * SIGKILL would end it before it could (`npm start`'s script ends the groups of its coordinator
 * and launcher on SIGTERM, or on any exit it sees). A launcher needs nothing more than SIGKILL:
 * its executors' groups die with it (its lifeline).
 */
export function killOnExit(child: ChildProcess, signal: NodeJS.Signals = 'SIGKILL'): void {
  if (!hooked) {
    hooked = true;
    const killAll = () => {
      for (const [c, s] of children) c.kill(s);
    };
    process.once('exit', killAll);
    for (const s of ['SIGTERM', 'SIGINT'] as const) {
      process.once(s, () => {
        killAll();
        process.exit(s === 'SIGTERM' ? 143 : 130);
      });
    }
  }
  children.set(child, signal);
  child.once('exit', () => children.delete(child));
}
