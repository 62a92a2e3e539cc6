import { CoordinatorError } from './errors.js';
import { treeSpent, type SessionRow } from './rows.js';
import type { Tx } from './store/store.js';

/**
 * Why a child session may take no new work, if its tree has spent its budget (a root session
 * has the budget; its children share it): any new job of the child, a message or a delivery of
 * its own children's outcomes. A root session itself is never refused.
 */
export async function budgetExceeded(tx: Tx, session: SessionRow, o: { unlocked?: boolean } = {}): Promise<CoordinatorError | null> {
  if (session.parentName === null) return null;
  // unlocked: a claim, which must not wait for the root (every child's cost report locks it)
  const root = o.unlocked ? await tx.peekSession(session.rootName) : await tx.session(session.rootName);
  if (!root || !treeSpent(root)) return null;
  return new CoordinatorError(
    'budget_exceeded',
    `session tree ${root.name} has spent $${root.treeCostUsd.toFixed(4)} of its $${root.budgetUsd} budget; no new child jobs`,
    { root_session_name: root.name, budget_usd: root.budgetUsd, tree_cost_usd: root.treeCostUsd },
  );
}
