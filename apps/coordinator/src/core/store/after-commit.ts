import type { Logger } from 'pino';

/**
 * Run what a committed transaction asked for (Tx.afterCommit). The change is made: one that
 * throws is logged, never turned into a failure of the transaction, and the others still run.
 */
export function runAfterCommit(fns: readonly (() => void)[], log: Logger): void {
  for (const fn of fns) {
    try {
      fn();
    } catch (err) {
      log.error({ err }, 'after-commit step failed');
    }
  }
}
