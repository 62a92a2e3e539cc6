import type { SyncReport, SyncResult } from '@agentq/protocol';
import type { CoreContext } from './context.js';
import { afterChanges, CoordinatorError, isStoreUnreachable } from './errors.js';
import { report } from './reports.js';

/**
 * The reports of a report-and-poll request (`POST /launcher/sync`), applied in order, each with
 * the semantics of its single endpoint; one refused does not fail the others.
 *
 * Consecutive status reports (started, completed, failed, stopped) are applied in one
 * transaction: a launcher's sync typically carries one per job it runs, and one transaction
 * instead of one each is most of what report-and-poll saves at the coordinator (with SQLite, one
 * write to the file). If one of them is refused, that transaction is abandoned (it changed
 * nothing) and they are applied again one by one, each answered on its own; so they are when one
 * fails (a raw database error the store gave up running again on: a unique key that stays taken),
 * which becomes that report's `internal_error` (settle). Output reports are
 * applied one by one where they stand (they are not transactional: see store.appendOutput).
 *
 * A store that cannot be reached (StoreUnreachableError: no connection to the database could be
 * had) fails the whole request with its 503 at the first report (or batch) that meets it, as an
 * unknown launcher does: every report after it would wait out the same connect timeout (30 s by
 * default, once per report: minutes for a sync nobody waits for any more) and fail alike, and so
 * would the poll part of the answer. The launcher sends them all again later, as after any failed
 * request (reports are idempotent: those applied before answer ok). Its `details.applied: false`
 * is kept only when it met the first report tried: reports tried before it may have been applied.
 */
export async function applyReports(
  ctx: CoreContext,
  launcherId: string,
  reports: readonly SyncReport[],
  appendOutput: (jobId: string, offset: number, data: string) => Promise<void>,
): Promise<SyncResult[]> {
  const results: SyncResult[] = [];
  // changes tried so far: a failure of any but the first may come after changes applied
  const tried = { n: 0 };
  try {
    for (let i = 0; i < reports.length; ) {
      const r = reports[i]!;
      if (r.kind === 'output') {
        tried.n++;
        results.push(await settle(ctx, launcherId, r, () => appendOutput(r.job_id, r.offset, r.data)));
        i++;
        continue;
      }
      let end = i;
      while (end < reports.length && reports[end]!.kind !== 'output') end++;
      results.push(...(await applyStatusReports(ctx, launcherId, reports.slice(i, end) as StatusReport[], tried)));
      i = end;
    }
  } catch (err) {
    throw tried.n > 1 ? afterChanges(err) : err;
  }
  return results;
}

type StatusReport = Exclude<SyncReport, { kind: 'output' }>;


/*
 * Each report is passed to `report` as its own body: its `job_id` and `kind` are not read there,
 * and the launcher is the one at the top, passed apart (no copy of the report is made).
 */
async function applyStatusReports(ctx: CoreContext, launcherId: string, run: readonly StatusReport[], tried: { n: number }): Promise<SyncResult[]> {
  const { store } = ctx;
  if (run.length > 1) {
    try {
      tried.n++;
      await store.transaction(async (tx) => {
        for (const r of run) await report(ctx, tx, r.kind, r.job_id, launcherId, r);
      });
      await store.touchLauncher(launcherId, ctx.clock.now());
      return run.map((r) => ({ job_id: r.job_id, kind: r.kind, ok: true }));
    } catch (err) {
      if (isStoreUnreachable(err)) throw err;
      // a raw error that a report run alone may not meet again would not be seen otherwise
      if (!(err instanceof CoordinatorError)) ctx.log.warn({ err, launcher_id: launcherId }, 'a sync batch of reports failed; applying them one by one');
      // one of them was refused, or failed (a raw database error the store gave up running again
      // on: a unique key that stays taken): nothing was applied; each on its own, to answer each.
      // Or PostgreSQL lost the connection during the COMMIT (503 storage_unavailable, outcome
      // unknown): it may all have been applied, and each run again answers ok (reports are
      // idempotent) or, the database being down, fails the request (settle)
    }
  }
  const results: SyncResult[] = [];
  for (const r of run) {
    tried.n++;
    results.push(await settle(ctx, launcherId, r, () => store.transaction((tx) => report(ctx, tx, r.kind, r.job_id, launcherId, r))));
  }
  await store.touchLauncher(launcherId, ctx.clock.now());
  return results;
}

/**
 * Run one report; a refusal becomes its result (an unknown or stale launcher, or a store that
 * cannot be reached, fails the request).
 * So does any other failure: the 500 `internal_error` its single endpoint would have answered,
 * logged as that endpoint's error handler would; the launcher sends that report again later (a
 * 5xx is not final), and the others of the request stand.
 */
async function settle(ctx: CoreContext, launcherId: string, r: SyncReport, apply: () => Promise<unknown>): Promise<SyncResult> {
  try {
    await apply();
    return { job_id: r.job_id, kind: r.kind, ok: true };
  } catch (err) {
    if (!(err instanceof CoordinatorError)) {
      ctx.log.error({ err, job_id: r.job_id, kind: r.kind, launcher_id: launcherId }, 'report failed');
      return { job_id: r.job_id, kind: r.kind, ok: false, error: { code: 'internal_error', message: 'internal error; see the coordinator log' } };
    }
    // the launcher is unknown or stale, or the store cannot be reached: nothing else in this
    // request can work (and with the store, each would wait out the connect timeout to learn it)
    if (err.code === 'launcher_unknown' || isStoreUnreachable(err)) throw err;
    const error = err.details ? { code: err.code, message: err.message, details: err.details } : { code: err.code, message: err.message };
    return { job_id: r.job_id, kind: r.kind, ok: false, error };
  }
}
