import type { Launcher } from '@agentq/protocol';
import { useCallback, useEffect, useRef, useState } from 'preact/hooks';
import { describeError } from '../lib/api.js';
import { useEventBatches, useNow, useResync, useServices } from '../lib/context.js';
import type { Batch } from '../lib/events.js';
import { ago, span } from '../lib/format.js';
import { isTerminal } from '../lib/jobs.js';
import { applyLauncherEvents, readAllLaunchers } from '../lib/launchers.js';
import { link } from '../lib/router.js';
import { Empty, ErrorNote, JobLink, Labels, StatusBadge } from './common.js';

/**
 * Heartbeats are not lifecycle events (there would be one per launcher per minute for nothing):
 * the list is read again this often to refresh heartbeat ages. Everything else is live.
 */
const REFRESH_MS = 10_000;

interface Row extends Launcher {
  /** when `seconds_since_heartbeat` was read, by this page's clock */
  read_at: number;
}

/** A batch of events, and when it came (a launcher's heartbeat age is counted from then). */
interface Received {
  events: Batch;
  at: number;
}

/** The rows after the events: launchers that come, change or go, and the jobs each one runs. */
function applyEvents(rows: Row[], received: readonly Received[]): Row[] {
  let out = rows;
  for (const { events, at } of received) {
    for (const e of events) {
      if ('launcher' in e) {
        out = applyLauncherEvents(out, [e], (l): Row => ({ ...l, read_at: at }));
      } else if ('job' in e) {
        // a launcher's running jobs change with job events, not launcher events
        const { job_id, launcher_id, status } = e.job;
        const holds = launcher_id !== null && !isTerminal(status) && status !== 'pending';
        out = out.map((x) => {
          const has = x.active_jobs.includes(job_id);
          const should = holds && x.launcher_id === launcher_id;
          if (has === should) return x;
          return { ...x, active_jobs: should ? [...x.active_jobs, job_id] : x.active_jobs.filter((j) => j !== job_id) };
        });
      }
    }
  }
  return out;
}

/** Launchers: labels, project roots, running jobs, heartbeat age, online or stale. */
export function LaunchersView() {
  const { api } = useServices();
  const [rows, setRows] = useState<Row[] | null>(null);
  const [error, setError] = useState<string | null>(null);
  const now = useNow(1000);

  // one load at a time: a newer one (the timer, a resync) cancels the one before, whose answer
  // (retried after a 503, say) could otherwise arrive after it and overwrite it
  const inFlight = useRef<AbortController | null>(null);
  // events that arrive while a load is in flight, applied again to its answer: the answer may
  // have been read before them (a launcher that registered meanwhile would vanish until the next
  // read, and would never show when it came before the first answer)
  const buffered = useRef<Received[] | null>(null);
  const load = useCallback(async () => {
    inFlight.current?.abort();
    const ac = (inFlight.current = new AbortController());
    buffered.current = [];
    try {
      const launchers = await readAllLaunchers(api, ac.signal);
      if (ac.signal.aborted) return;
      const at = Date.now();
      setRows(applyEvents(launchers.map((l) => ({ ...l, read_at: at })), buffered.current ?? []));
      setError(null);
    } catch (err) {
      if (!ac.signal.aborted) setError(describeError(err));
    } finally {
      if (inFlight.current === ac) {
        inFlight.current = null;
        buffered.current = null;
      }
    }
  }, [api]);
  useEffect(() => {
    void load();
    const timer = setInterval(() => void load(), REFRESH_MS);
    return () => {
      clearInterval(timer);
      inFlight.current?.abort();
    };
  }, [load]);
  useResync(() => void load());

  useEventBatches((batch) => {
    const received: Received = { events: batch, at: Date.now() };
    buffered.current?.push(received);
    setRows((list) => (list === null ? list : applyEvents(list, [received])));
  });

  if (rows === null) return error ? <ErrorNote>{error}</ErrorNote> : <p class="muted">Loading launchers…</p>;
  return (
    <section class="view launchers-view">
      <header class="view-head">
        <h1>Launchers</h1>
        <span class="muted">
          {rows.filter((l) => l.status === 'online').length} online · {rows.filter((l) => l.status === 'stale').length} stale
        </span>
      </header>
      {error && <ErrorNote>{error}</ErrorNote>}
      {rows.length === 0 ? (
        <Empty>
          No launcher is registered. Start one on a host with the agent CLI:{' '}
          <code>npm run launcher -- --url {location.origin}</code>
        </Empty>
      ) : (
        <table class="table launchers-table">
          <thead>
            <tr>
              <th>Launcher</th>
              <th>Status</th>
              <th>Heartbeat</th>
              <th>Running jobs</th>
              <th>Labels</th>
              <th>Project roots</th>
              <th>Executor</th>
              <th>Registered</th>
            </tr>
          </thead>
          <tbody>
            {rows.map((l) => {
              const age = l.seconds_since_heartbeat * 1000 + (now - l.read_at);
              return (
                <tr key={l.launcher_id} data-launcher-id={l.launcher_id} data-status={l.status}>
                  <td>
                    <strong>{l.hostname ?? '(no hostname)'}</strong>
                    <br />
                    <a class="mono small" href={link('/jobs', { launcher: l.launcher_id })} title="jobs of this launcher">
                      {l.launcher_id}
                    </a>
                  </td>
                  <td>
                    <StatusBadge status={l.status} />
                  </td>
                  <td title={l.last_heartbeat}>{age < 1000 ? 'just now' : `${span(age)} ago`}</td>
                  <td>
                    <span class="muted">
                      {l.active_jobs.length}
                      {l.max_jobs !== null ? ` / ${l.max_jobs}` : ''}
                    </span>{' '}
                    {l.active_jobs.slice(0, 10).map((id) => (
                      <span key={id}>
                        <JobLink id={id} />{' '}
                      </span>
                    ))}
                    {l.active_jobs.length > 10 && <span class="muted">…</span>}
                  </td>
                  <td>
                    <Labels labels={l.labels} />
                  </td>
                  <td class="mono small">
                    {l.project_roots.length > 0 ? l.project_roots.map((r) => <div key={r}>{r}</div>) : (l.project_dir ?? '—')}
                  </td>
                  <td>
                    {l.executor_type ?? '—'}
                    {l.version && <span class="muted small"> v{l.version}</span>}
                  </td>
                  <td title={l.registered_at}>{ago(l.registered_at, now)}</td>
                </tr>
              );
            })}
          </tbody>
        </table>
      )}
    </section>
  );
}
