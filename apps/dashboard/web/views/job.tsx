import type { Job, JobOutput, Session, StopJobResponse } from '@agentq/protocol';
import { useEffect, useRef, useState } from 'preact/hooks';
import { ApiError, describeError } from '../lib/api.js';
import { useEventBatches, useNow, useResync, useServices } from '../lib/context.js';
import type { TimelineEntry } from '../lib/events.js';
import { ago, bytes, clock, runTime, span, timeOfDay, usageText } from '../lib/format.js';
import { isTerminal, mergeJob } from '../lib/jobs.js';
import { jobLink, link } from '../lib/router.js';
import { sleep } from '../lib/sleep.js';
import { CallbackMark, ErrorNote, Labels, StatusBadge } from './common.js';

/** One job: every field, a timeline of its status changes, its output live, and a stop button. */
export function JobView({ id }: { id: string }) {
  const { api } = useServices();
  const [job, setJob] = useState<Job | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [reload, setReload] = useState(0);
  /** whether the job's session takes input (false: closed, it can only be started again) */
  const [acceptsInput, setAcceptsInput] = useState(true);
  const now = useNow(1000);
  const sessionName = job?.session_name;

  useEffect(() => {
    if (sessionName === undefined) return;
    const ac = new AbortController();
    api.get<Session>(`/sessions/${encodeURIComponent(sessionName)}`, undefined, ac.signal).then(
      (s) => setAcceptsInput(s.accepts_input),
      () => setAcceptsInput(true), // not known (gone, or not readable): the start form says what it can
    );
    return () => ac.abort();
  }, [api, sessionName, job?.status, reload]);

  useEffect(() => {
    const ac = new AbortController();
    setError(null);
    api.get<Job>(`/jobs/${encodeURIComponent(id)}`, undefined, ac.signal).then(
      (j) => setJob((known) => mergeJob(known ?? undefined, j)),
      (err: unknown) => {
        if (ac.signal.aborted) return;
        setError(err instanceof ApiError && err.code === 'job_not_found' ? `No job ${id} (it may have been evicted).` : describeError(err));
      },
    );
    return () => ac.abort();
  }, [api, id, reload]);
  useResync(() => setReload((n) => n + 1));

  useEventBatches((batch) => {
    for (const e of batch) {
      if (!('job' in e) || e.job.job_id !== id) continue;
      // history retention deleted it: it leaves the view, as it leaves the lists
      if (e.type === 'job.evicted') setError(`Job ${id} was deleted by history retention (JOB_HISTORY_DAYS).`);
      else setJob((known) => mergeJob(known ?? undefined, e.job));
    }
  });

  if (error) return <ErrorNote>{error}</ErrorNote>;
  if (job === null || job.job_id !== id) return <p class="muted">Loading {id}…</p>;

  return (
    <section class="view job-view" data-job-id={job.job_id} data-status={job.status}>
      <header class="view-head">
        <h1>
          <span class="mono">{job.job_id}</span> <StatusBadge status={job.status} /> <CallbackMark job={job} />
        </h1>
        <div class="actions">
          <StopButton job={job} onStopped={(j) => setJob((known) => mergeJob(known ?? undefined, j))} />
          {acceptsInput ? (
            <a class="button" href={link('/start', { type: 'resume_session', session: job.session_name })}>
              Resume session
            </a>
          ) : (
            <a
              class="button"
              href={link('/start', { type: 'start_session', session: job.session_name, parent: job.parent_session_name ?? undefined })}
            >
              Start session again
            </a>
          )}
          <a class="button subtle" href={link('/jobs', { session: job.session_name })}>
            Jobs of {job.session_name}
          </a>
        </div>
      </header>
      {job.pending_reason && (
        <p class="note warn" data-testid="pending-reason">
          Waiting: {job.pending_reason}
        </p>
      )}
      <dl class="summary">
        <dt>Session</dt>
        <dd>
          <a href={link('/sessions', { focus: job.session_name })}>{job.session_name}</a>
          {job.parent_session_name && (
            <>
              {' '}
              (child of <a href={link('/sessions', { focus: job.parent_session_name })}>{job.parent_session_name}</a>)
            </>
          )}
        </dd>
        <dt>Type</dt>
        <dd>{job.type}</dd>
        <dt>Created</dt>
        <dd title={job.created_at}>{ago(job.created_at, now)}</dd>
        <dt>Run time</dt>
        <dd>{runTime(job, now)}</dd>
        <dt>Usage</dt>
        <dd>{usageText(job.usage, job.cost_usd)}</dd>
      </dl>
      <h2>Prompt</h2>
      <pre class="text" data-testid="prompt">{job.prompt || '(not loaded)'}</pre>
      {job.result !== null && (
        <>
          <h2>Result</h2>
          <pre class="text" data-testid="result">{job.result}</pre>
        </>
      )}
      {job.error !== null && (
        <>
          <h2>Error</h2>
          <pre class="text error" data-testid="error">{job.error}</pre>
        </>
      )}
      <div class="columns">
        <div>
          <h2>Timeline</h2>
          <Timeline job={job} />
        </div>
        <div>
          <h2>Output</h2>
          <OutputTail job={job} />
        </div>
      </div>
      <h2>All fields</h2>
      <Fields job={job} />
    </section>
  );
}

function StopButton({ job, onStopped }: { job: Job; onStopped: (job: Job) => void }) {
  const { api } = useServices();
  const [busy, setBusy] = useState(false);
  const [message, setMessage] = useState<string | null>(null);
  if (isTerminal(job.status)) return null;
  const stop = async () => {
    setBusy(true);
    setMessage(null);
    try {
      const answer = await api.post<StopJobResponse>(`/jobs/${encodeURIComponent(job.job_id)}/stop`);
      onStopped(answer.job);
      setMessage(answer.outcome === 'stopping' ? 'stop requested: waiting for the launcher' : answer.outcome.replace('_', ' '));
    } catch (err) {
      setMessage(describeError(err));
    } finally {
      setBusy(false);
    }
  };
  return (
    <>
      <button
        type="button"
        class="danger"
        data-testid="stop"
        disabled={busy || job.status === 'stopping'}
        onClick={() => void stop()}
      >
        {job.status === 'stopping' ? 'Stopping…' : 'Stop'}
      </button>
      {message && <span class="muted small">{message}</span>}
    </>
  );
}

const LABELS: Record<string, string> = {
  'job.created': 'created',
  'job.claimed': 'claimed',
  'job.requeued': 'back in the queue',
  'job.started': 'running',
  'job.stopping': 'stop requested',
  'job.completed': 'completed',
  'job.failed': 'failed',
  'job.stopped': 'stopped',
  'job.interrupted': 'interrupted',
  'job.timed_out': 'timed out',
  'job.evicted': 'evicted',
};

/**
 * Status changes from the event stream (the page replays the coordinator's recent events when
 * it connects), completed by the job's own timestamps for what happened before that window.
 */
function Timeline({ job }: { job: Job }) {
  const { stream } = useServices();
  const seen: readonly TimelineEntry[] = stream.timeline.get(job.job_id) ?? [];
  const rows: { at: string; what: string; detail?: string | undefined; type: string }[] = seen.map((e) => ({
    at: e.at,
    type: e.type,
    what: LABELS[e.type] ?? e.type,
    detail: e.type === 'job.claimed' ? (e.launcher_id ?? undefined) : e.type === 'job.failed' ? (e.error ?? undefined) : undefined,
  }));
  const has = (type: string) => seen.some((e) => e.type === type);
  const fromFields: [string, string | null, string][] = [
    ['job.created', job.created_at, 'created'],
    ['job.claimed', job.claimed_at, 'claimed'],
    ['job.started', job.started_at, 'running'],
    ['job.stopping', job.stop_requested_at, `stop requested${job.stop_reason ? ` (${job.stop_reason})` : ''}`],
    [`job.${job.status}`, isTerminal(job.status) ? job.completed_at : null, LABELS[`job.${job.status}`] ?? job.status],
  ];
  for (const [type, at, what] of fromFields) if (at !== null && !has(type)) rows.push({ at, type, what });
  rows.sort((a, b) => (a.at < b.at ? -1 : a.at > b.at ? 1 : 0));
  const start = Date.parse(job.created_at);
  return (
    <ol class="timeline" data-testid="timeline">
      {rows.map((r, i) => (
        <li key={i} data-type={r.type}>
          <time title={clock(r.at)}>{timeOfDay(r.at)}</time> <span class="muted small">+{span(Date.parse(r.at) - start)}</span>{' '}
          <strong>{r.what}</strong>
          {r.detail && <span class="muted"> · {r.detail}</span>}
        </li>
      ))}
    </ol>
  );
}

/** Text kept on the page per job: older output is dropped (the coordinator keeps its own cap). */
const MAX_OUTPUT_CHARS = 256 * 1024;

/**
 * The tail of the job's output, followed live with `GET /jobs/{id}/output?offset=..&wait_ms=..`:
 * each request is held by the coordinator until new output comes or the job ends.
 */
function OutputTail({ job }: { job: Job }) {
  const { api } = useServices();
  const [text, setText] = useState('');
  const [info, setInfo] = useState<{ total: number; truncated: boolean; done: boolean } | null>(null);
  const [error, setError] = useState<string | null>(null);
  const pre = useRef<HTMLPreElement>(null);
  const id = job.job_id;

  useEffect(() => {
    const ac = new AbortController();
    setText('');
    setInfo(null);
    setError(null);
    const path = `/jobs/${encodeURIComponent(id)}/output`;
    (async () => {
      let r = await api.get<JobOutput>(path, { tail_bytes: 64 * 1024 }, ac.signal);
      let kept = r.output;
      setText(kept);
      setInfo({ total: r.total_bytes, truncated: r.offset > 0, done: r.terminal });
      let failures = 0;
      while (!ac.signal.aborted && !(r.terminal && r.next_offset >= r.total_bytes)) {
        try {
          r = await api.get<JobOutput>(path, { offset: r.next_offset, wait_ms: 25_000 }, ac.signal);
          failures = 0;
        } catch (err) {
          if (ac.signal.aborted || (err instanceof ApiError && err.status >= 400 && err.status < 500)) throw err;
          await sleep(Math.min(10_000, 500 * 2 ** failures++), ac.signal);
          continue;
        }
        if (r.output) {
          kept = (kept + r.output).slice(-MAX_OUTPUT_CHARS);
          setText(kept);
        }
        setInfo({ total: r.total_bytes, truncated: r.truncated || kept.length >= MAX_OUTPUT_CHARS, done: r.terminal });
      }
    })().catch((err: unknown) => {
      if (!ac.signal.aborted) setError(describeError(err));
    });
    return () => ac.abort();
  }, [api, id]);

  // keep the newest line in sight, unless the reader scrolled up
  useEffect(() => {
    const el = pre.current;
    if (el && el.scrollHeight - el.scrollTop - el.clientHeight < 80) el.scrollTop = el.scrollHeight;
  }, [text]);

  return (
    <div>
      <pre class="output" ref={pre} data-testid="output">
        {text || (info?.done ? '(no output)' : '(waiting for output…)')}
      </pre>
      <p class="muted small">
        {info ? `${bytes(info.total)} in all${info.truncated ? ' · older output not shown' : ''}${info.done ? '' : ' · following'}` : ''}
        {error && <span class="error"> · {error}</span>}
      </p>
    </div>
  );
}

/** Every field of the job as the API returns it, new fields included. */
function Fields({ job }: { job: Job }) {
  return (
    <table class="table fields" data-testid="fields">
      <tbody>
        {Object.entries(job).map(([key, value]) => (
          <tr key={key} data-field={key}>
            <th class="mono">{key}</th>
            <td>
              <FieldValue name={key} value={value} />
            </td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

function FieldValue({ name, value }: { name: string; value: unknown }) {
  if (value === null || value === undefined) return <span class="muted">—</span>;
  if (name === 'callback_of' && Array.isArray(value)) {
    return (
      <>
        {value.map((id: string) => (
          <a class="mono" href={jobLink(id)} key={id}>
            {id}{' '}
          </a>
        ))}
      </>
    );
  }
  if (name === 'requires' && typeof value === 'object') return <Labels labels={value as Record<string, string>} />;
  if (name === 'launcher_id') return <a class="mono" href={link('/jobs', { launcher: String(value) })}>{String(value)}</a>;
  if (typeof value === 'string' && /_at$/.test(name)) return <span title={value}>{clock(value)}</span>;
  if (typeof value === 'string') return <span class="pre-wrap">{value.length > 500 ? `${value.slice(0, 500)}…` : value}</span>;
  if (typeof value === 'object') return <code>{JSON.stringify(value)}</code>;
  return <span>{String(value)}</span>;
}
