import type { JobList, Launcher } from '@agentq/protocol';
import { useCallback, useEffect, useRef, useState } from 'preact/hooks';
import { describeError } from '../lib/api.js';
import { useEventBatches, useNow, useResync, useServices } from '../lib/context.js';
import { ago, runTime, usd } from '../lib/format.js';
import {
  applyJob,
  filterFromQuery,
  filterToApi,
  filterToQuery,
  JOB_STATUSES,
  type JobEvent,
  type JobFilter,
  type JobPage,
} from '../lib/jobs.js';
import {
  applyLauncherEvents,
  LAUNCHERS_READ_TIMEOUT_MS,
  readAllLaunchers,
  type LauncherEvent,
} from '../lib/launchers.js';
import { link, navigate } from '../lib/router.js';
import { READ_TIMEOUT_MS, ReadTimeout, withTimeout } from '../lib/timeout.js';
import { CallbackMark, Empty, ErrorNote, JobLink, StatusBadge } from './common.js';

/** Rows per page: the list never renders more, whatever the number of jobs in the system. */
export const PAGE_SIZE = 50;

interface State {
  page: JobPage;
  /** cursor of each page from the newest to the shown one (null: the first page) */
  cursors: (string | null)[];
  loading: boolean;
  error: string | null;
  /** what "read again" under the error does: the check of "older →" that failed (null: none offered) */
  again: 'older' | null;
}

const initial: State = {
  page: { rows: [], next: null, first: true, shifted: false },
  cursors: [null],
  loading: true,
  error: null,
  again: null,
};

/** Jobs, newest first: filter by status, session and launcher; page with the API's cursor. */
export function JobsView({ query }: { query: URLSearchParams }) {
  const { api } = useServices();
  const filter = filterFromQuery(query);
  const filterKey = filterToQuery(filter);
  const [state, setState] = useState<State>(initial);
  const [launchers, setLaunchers] = useState<Launcher[]>([]);
  const now = useNow(5000);
  // events that arrive while a page is loading are applied again to the loaded page, evictions
  // included: the answer may have been read before a job was deleted
  const buffered = useRef<JobEvent[] | null>(null);
  const load = useRef(0);
  // the page read in flight: aborted by the next one and when the view goes, so that a read
  // given up (ReadTimeout) is not read again for a view that is no longer there
  const inFlight = useRef<AbortController | null>(null);
  useEffect(() => () => inFlight.current?.abort(), []);

  const fetchPage = useCallback(
    async (cursors: (string | null)[]) => {
      const token = ++load.current;
      inFlight.current?.abort();
      const ac = (inFlight.current = new AbortController());
      buffered.current = [];
      setState((s) => ({ ...s, cursors, loading: true, error: null, again: null }));
      const cursor = cursors[cursors.length - 1] ?? null;
      try {
        const list = await withTimeout(READ_TIMEOUT_MS, ac.signal, 'GET /jobs', (signal) =>
          api.get<JobList>('/jobs', { ...filterToApi(filter), limit: PAGE_SIZE, cursor }, signal),
        );
        if (token !== load.current) return;
        let page: JobPage = { rows: list.jobs, next: list.next_cursor, first: cursor === null, shifted: false };
        for (const { job, evicted } of buffered.current ?? []) page = applyJob(page, job, evicted, filter, PAGE_SIZE);
        buffered.current = null;
        setState({ page, cursors, loading: false, error: null, again: null });
      } catch (err) {
        if (token !== load.current || ac.signal.aborted) return;
        // a page that does not come is read again: its events are buffered meanwhile, which
        // must not go on for ever
        if (err instanceof ReadTimeout) return void fetchPage(cursors);
        buffered.current = null;
        setState((s) => ({ ...s, loading: false, error: describeError(err) }));
      }
    },
    // the filter is fully described by its key
    [api, filterKey],
  );

  useEffect(() => {
    void fetchPage([null]);
  }, [fetchPage]);
  useResync(() => void fetchPage(state.cursors));

  // launcher events that arrive while the launchers are read, applied again to the answer: it
  // may have been read before them (a launcher that registered meanwhile would never be offered).
  // A page of the read that does not come in time is given up and the read starts again, with
  // the events buffered from then: a read that never answers would buffer events for ever.
  const launcherEvents = useRef<LauncherEvent[] | null>(null);
  useEffect(() => {
    const ac = new AbortController();
    const read = async () => {
      for (;;) {
        const buffered: LauncherEvent[] = (launcherEvents.current = []);
        try {
          const list = await readAllLaunchers(api, ac.signal, { pageTimeoutMs: LAUNCHERS_READ_TIMEOUT_MS });
          if (!ac.signal.aborted) setLaunchers(applyLauncherEvents(list, buffered, (l) => l));
          return;
        } catch (err) {
          // any other failure leaves the launchers the events bring (the column names fewer hosts)
          if (!(err instanceof ReadTimeout)) return;
        } finally {
          if (launcherEvents.current === buffered) launcherEvents.current = null;
        }
      }
    };
    void read();
    return () => ac.abort();
  }, [api]);

  useEventBatches((batch) => {
    // launchers that register (or go) after the page read them: the launcher column and filter
    const changed = batch.flatMap((e) => ('launcher' in e ? [e] : []));
    if (changed.length > 0) {
      launcherEvents.current?.push(...changed);
      setLaunchers((list) => applyLauncherEvents(list, changed, (l) => l));
    }
    const jobs = batch.flatMap((e): JobEvent[] => ('job' in e ? [{ job: e.job, evicted: e.type === 'job.evicted' }] : []));
    if (jobs.length === 0) return;
    if (buffered.current !== null) buffered.current.push(...jobs);
    setState((s) => {
      let page = s.page;
      for (const { job, evicted } of jobs) page = applyJob(page, job, evicted, filter, PAGE_SIZE);
      return page === s.page ? s : { ...s, page };
    });
  });

  const setFilter = (f: Partial<JobFilter>) => navigate(link('/jobs') + filterToQuery({ ...filter, ...f }));

  const older = async () => {
    const { page, cursors } = state;
    let next = page.next;
    if (page.shifted) {
      // Jobs that came in live pushed rows off this page, and its cursor points past them: read
      // the page again from its own cursor. Its new cursor follows the rows the page holds now,
      // so page on from there only if each of them is shown. Otherwise show the page as it is
      // now first (the next click pages on): a job created at the same instant as the page's
      // newest may belong on the page before, which creation times cannot tell, and an event may
      // still be on its way.
      // This read is a page read as fetchPage's are: a newer one (a gap, another page) or the
      // view going aborts it, and one that has not come in READ_TIMEOUT_MS is given up and shown
      // as the error it is, with "read again" (it had no time limit: the button did nothing, for
      // ever). The page shown stays live meanwhile: its events are applied to it, none buffered.
      const token = ++load.current;
      inFlight.current?.abort();
      const ac = (inFlight.current = new AbortController());
      setState((s) => ({ ...s, loading: true, error: null, again: null }));
      const cursor = cursors[cursors.length - 1] ?? null;
      try {
        const current = await withTimeout(READ_TIMEOUT_MS, ac.signal, 'GET /jobs', (signal) =>
          api.get<JobList>('/jobs', { ...filterToApi(filter), limit: PAGE_SIZE, cursor }, signal),
        );
        if (token !== load.current) return;
        const shown = new Set(page.rows.map((r) => r.job_id));
        if (!current.jobs.every((j) => shown.has(j.job_id))) {
          void fetchPage(cursors);
          return;
        }
        next = current.next_cursor;
      } catch (err) {
        if (token !== load.current || ac.signal.aborted) return;
        setState((s) => ({ ...s, loading: false, error: describeError(err), again: 'older' }));
        return;
      }
    }
    if (next !== null) void fetchPage([...cursors, next]);
    else setState((s) => ({ ...s, loading: false }));
  };

  const hostOf = (id: string | null) => (id === null ? null : launchers.find((l) => l.launcher_id === id)?.hostname ?? null);
  const { page, cursors } = state;
  const pageNo = cursors.length;

  return (
    <section class="view jobs-view">
      <header class="view-head">
        <h1>Jobs</h1>
        <form class="filters" onSubmit={(e) => e.preventDefault()}>
          <label>
            Status
            <select
              name="status"
              value={filter.status}
              onChange={(e) => setFilter({ status: (e.currentTarget as HTMLSelectElement).value as JobFilter['status'] })}
            >
              <option value="">any</option>
              <option value="active">active (not finished)</option>
              <option value="finished">finished</option>
              {JOB_STATUSES.map((s) => (
                <option value={s} key={s}>
                  {s.replace('_', ' ')}
                </option>
              ))}
            </select>
          </label>
          <label>
            Session
            <input
              name="session"
              placeholder="any session"
              value={filter.session}
              onChange={(e) => setFilter({ session: (e.currentTarget as HTMLInputElement).value.trim() })}
            />
          </label>
          <label>
            Launcher
            <select
              name="launcher"
              value={filter.launcher}
              onChange={(e) => setFilter({ launcher: (e.currentTarget as HTMLSelectElement).value })}
            >
              <option value="">any</option>
              {filter.launcher && !launchers.some((l) => l.launcher_id === filter.launcher) && (
                <option value={filter.launcher}>{filter.launcher}</option>
              )}
              {launchers.map((l) => (
                <option value={l.launcher_id} key={l.launcher_id}>
                  {l.hostname ?? l.launcher_id} ({l.launcher_id})
                </option>
              ))}
            </select>
          </label>
          {filterKey && (
            <a class="button subtle" href={link('/jobs')}>
              clear
            </a>
          )}
        </form>
      </header>
      {state.error && (
        <ErrorNote>
          {state.error}
          {state.again === 'older' && (
            <>
              {' '}
              <button type="button" class="link" onClick={() => void older()}>
                read again
              </button>
            </>
          )}
        </ErrorNote>
      )}
      <table class="table jobs-table" aria-busy={state.loading}>
        <thead>
          <tr>
            <th>Job</th>
            <th>Session</th>
            <th>Type</th>
            <th>Status</th>
            <th>Launcher</th>
            <th>Created</th>
            <th>Run time</th>
            <th class="num">Cost</th>
          </tr>
        </thead>
        <tbody>
          {page.rows.map((job) => (
            <tr key={job.job_id} data-job-id={job.job_id} data-status={job.status}>
              <td>
                <JobLink id={job.job_id} />
              </td>
              <td>
                <a href={link('/jobs', { session: job.session_name })} title="jobs of this session">
                  {job.session_name}
                </a>
              </td>
              <td>
                {job.type === 'start_session' ? 'start' : 'resume'} <CallbackMark job={job} />
              </td>
              <td>
                <StatusBadge status={job.status} />
                {job.pending_reason && (
                  <span class="hint" title={job.pending_reason}>
                    {' '}
                    ⓘ
                  </span>
                )}
              </td>
              <td class="mono small">{job.launcher_id === null ? '—' : (hostOf(job.launcher_id) ?? job.launcher_id)}</td>
              <td title={job.created_at}>{ago(job.created_at, now)}</td>
              <td>{runTime(job, now)}</td>
              <td class="num">{usd(job.cost_usd)}</td>
            </tr>
          ))}
        </tbody>
      </table>
      {/* a read that failed (no token yet, an outage) knows nothing of the jobs: the error says so, not "no jobs yet" */}
      {!state.loading && !state.error && page.rows.length === 0 && (
        <Empty>
          No jobs{filterKey ? ' match these filters' : ' yet'}. <a href={link('/start')}>Start a session</a>.
        </Empty>
      )}
      <nav class="pager">
        <span class="muted">
          page {pageNo}
          {page.first ? ' · live' : ''}
          {state.loading ? ' · loading…' : ''}
        </span>
        <button type="button" disabled={pageNo === 1} onClick={() => void fetchPage([null])}>
          ⇤ newest
        </button>
        <button type="button" disabled={pageNo === 1} onClick={() => void fetchPage(cursors.slice(0, -1))}>
          ← newer
        </button>
        <button type="button" disabled={page.next === null && !page.shifted} onClick={() => void older()}>
          older →
        </button>
      </nav>
    </section>
  );
}
