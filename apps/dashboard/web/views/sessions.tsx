import type { EventSession as Session, JobList, SessionList } from '@agentq/protocol';
import { useCallback, useEffect, useMemo, useRef, useState } from 'preact/hooks';
import { ApiError, describeError } from '../lib/api.js';
import { useEventBatches, useNow, useResync, useServices } from '../lib/context.js';
import { ago, usageText } from '../lib/format.js';
import { applyJob, type JobEvent, type JobFilter, type JobPage } from '../lib/jobs.js';
import { byCreation } from '../lib/order.js';
import { link } from '../lib/router.js';
import { pendingNote, SessionMap } from '../lib/sessions.js';
import { READ_TIMEOUT_MS, withTimeout } from '../lib/timeout.js';
import { CallbackMark, Empty, ErrorNote, JobLink, StatusBadge } from './common.js';

const PAGE_SIZE = 200;
/** Root sessions rendered at first (and added per "show more"): the tree never draws them all. */
const ROOTS_SHOWN = 100;
/** levels a session may be below its root (the protocol's MAX_SESSION_DEPTH) */
const MAX_ANCESTORS = 5;
const CHILDREN_SHOWN = 100;
/** A session's newest jobs listed under its node. */
const SESSION_JOBS = 10;

/** What the pages read so far cover: everything, or the sessions down to `oldest`. */
interface Range {
  complete: boolean;
  oldest: string;
}
type Which = 'roots' | 'all' | { parent: string };
interface Cursors {
  roots: string | null;
  all: string | null;
}

/**
 * Whether a session created at `createdAt` falls within the pages read. One created at the same
 * instant as the oldest session read (a batch) may be on the next page: `sameInstant` says
 * whether to count it (it is, when it was read with that page).
 */
const covers = (range: Range, createdAt: string, sameInstant: boolean): boolean =>
  range.complete || createdAt > range.oldest || (sameInstant && createdAt === range.oldest);

/**
 * Sessions as a tree (parent → children), newest roots first. Each node shows its status, its
 * last job's status, and its usage and cost (its own and its whole subtree's); a node's jobs,
 * callback jobs marked, open on demand.
 */
export function SessionsView({ query }: { query: URLSearchParams }) {
  const { api, stream } = useServices();
  const focus = query.get('focus');
  // one mutable map, re-rendered through `version`
  const [sessions] = useState(() => new SessionMap());
  const [version, setVersion] = useState(0);
  // the next pages: of roots (more trees), and of all sessions (what fills the trees in)
  const [next, setNext] = useState<Cursors>({ roots: null, all: null });
  const [loading, setLoading] = useState(true);
  const [error, setError] = useState<string | null>(null);
  const [shown, setShown] = useState(ROOTS_SHOWN);
  // what the pages read cover: every root (every session), or those down to `oldest` (null: the
  // first page is not read yet). The trees are paged by their roots (`?root=true`): paged among
  // all sessions, a tree with many children would fill the first page with them, drawn as roots
  // (their parent unread) while the real roots waited on later pages. The pages of all sessions,
  // read beside them, fill the trees in; a node offers to read the children they left out.
  const listed = useRef<{ roots: Range | null; all: Range | null }>({ roots: null, all: null });
  // sessions that only replayed events name, until the API says whether they still exist
  const unconfirmed = useRef(new Map<string, Session>());
  // those whose check failed (other than a 404: an outage, a refusal), with why: shown apart from
  // the trees' own error, which is about the list (it hid "No sessions yet" of a list read whole)
  const [unchecked, setUnchecked] = useState<ReadonlyMap<string, { session: Session; error: string }>>(new Map());
  const checked = (name: string) => setUnchecked((m) => (m.has(name) ? new Map([...m].filter(([n]) => n !== name)) : m));
  // while the trees are read again (see reload): the sessions taken meanwhile other than from its
  // answers (events, a node's children read, a confirmed session), the newest version of each,
  // taken again after the answers, which clear the map and may have been read before them
  const duringReload = useRef<Map<string, Session> | null>(null);
  const keep = (s: Session): boolean => {
    const during = duringReload.current;
    const had = during?.get(s.session_name);
    if (during && (had === undefined || had.updated_at <= s.updated_at)) during.set(s.session_name, s);
    return sessions.upsert(s);
  };

  /**
   * Replayed events are older than the page's reads and may name a session deleted since without
   * a `session.evicted` (by a coordinator from before that event): one the page has not read is
   * shown only once the API confirms it, and only when it falls within the pages read (an older
   * one comes with "load more sessions").
   */
  const confirm = async () => {
    const { roots, all } = listed.current;
    if (roots === null || all === null || unconfirmed.current.size === 0) return;
    const named = [...unconfirmed.current.values()];
    unconfirmed.current.clear();
    for (const s of named) {
      if (sessions.all.has(s.session_name)) {
        if (keep(s)) setVersion((v) => v + 1);
        continue;
      }
      // one created at the same instant (a batch) as the oldest read but not read with it is on
      // the next page: each of a batch would otherwise be read here one by one
      if (!covers(s.parent_session_name === null ? roots : all, s.created_at, false)) continue;
      try {
        const found = await api.get<Session>(`/sessions/${encodeURIComponent(s.session_name)}`);
        if (keep(found)) setVersion((v) => v + 1);
        checked(s.session_name);
      } catch (err) {
        if (err instanceof ApiError && err.status === 404) checked(s.session_name);
        else setUnchecked((m) => new Map(m).set(s.session_name, { session: s, error: describeError(err) }));
      }
    }
  };

  /** Take a page read: of roots, of all sessions, or of one node's children; its next cursor. */
  const takePage = useCallback((list: SessionList, which: Which): string | null => {
    // a page of one node's children moves neither list's cursor, and is not one the trees are
    // read again from: kept if they are (its children would be lost with the map cleared)
    for (const s of list.sessions) {
      if (typeof which === 'object') keep(s);
      else sessions.upsert(s);
    }
    if (which === 'roots' || which === 'all') {
      setNext((n) => ({ ...n, [which]: list.next_cursor }));
      // pages come newest first: a page's last session is the oldest read so far
      const oldest = list.sessions.at(-1)?.created_at ?? listed.current[which]?.oldest ?? '';
      listed.current = { ...listed.current, [which]: { complete: list.next_cursor === null, oldest } };
    }
    setVersion((v) => v + 1);
    void confirm();
    return list.next_cursor;
  }, []);
  const readPage = useCallback(
    (cursor: string | null, which: Which): Promise<SessionList> => {
      const filter = which === 'roots' ? { root: 'true' } : which === 'all' ? {} : { parent: which.parent };
      return api.get<SessionList>('/sessions', { limit: PAGE_SIZE, cursor, ...filter });
    },
    [api],
  );
  /** Read one page and take it; its next cursor. */
  const loadPage = useCallback(
    async (cursor: string | null, which: Which): Promise<string | null> => takePage(await readPage(cursor, which), which),
    [readPage, takePage],
  );

  /** Run reads, with the pager's buttons off and errors shown meanwhile. */
  const reading = useRef(0);
  const read = useCallback(async (...reads: Promise<unknown>[]) => {
    reading.current++;
    setLoading(true);
    setError(null);
    try {
      await Promise.all(reads);
    } catch (err) {
      setError(describeError(err));
    } finally {
      if (--reading.current === 0) setLoading(false);
    }
  }, []);

  // the root of the focused session's tree (`?focus=`), read with its line of ancestors: drawn
  // first, whatever page its tree is on, so the focused session shows in its place in the tree
  const [focusRoot, setFocusRoot] = useState<string | null>(null);
  const readLine = useCallback(
    async (name: string): Promise<Session[]> => {
      const line: Session[] = [];
      let at: string | null = name;
      // a session is at most MAX_ANCESTORS levels below its root
      for (let level = 0; at !== null && level <= MAX_ANCESTORS; level++) {
        const s: Session = await api.get<Session>(`/sessions/${encodeURIComponent(at)}`);
        line.push(s);
        at = s.parent_session_name;
      }
      return line;
    },
    [api],
  );

  // Reading everything again (a gap in the stream) keeps the trees as they are until the first
  // pages (and the focused session's line) have come, then puts them in place at once. Cleared
  // before, the trees were drawn nearly empty by any event meanwhile: every node was drawn anew,
  // and lost its open job list and the children it showed. Sessions that events change meanwhile
  // are taken again after the answers, which may have been read before them: the newest version
  // of each (a burst of events for one session is kept once), see keep.
  const reloads = useRef(0);
  const reload = useCallback(() => {
    const generation = ++reloads.current;
    const during = (duringReload.current = new Map<string, Session>());
    // best effort: a focused session that is gone leaves the trees as they are
    const line = focus === null ? Promise.resolve(null) : readLine(focus).catch(() => null);
    const first = (async () => {
      try {
        const [roots, all, focused] = await Promise.all([readPage(null, 'roots'), readPage(null, 'all'), line]);
        if (generation !== reloads.current) return;
        sessions.clear();
        listed.current = { roots: null, all: null };
        takePage(roots, 'roots');
        takePage(all, 'all');
        // the focused tree's root is set in the same render as the trees: unset meanwhile, a tree
        // on a later page would leave the page and come back drawn anew
        let root: string | null = null;
        for (const s of focused ?? []) {
          sessions.upsert(s);
          if (s.parent_session_name === null) root = s.session_name;
        }
        setFocusRoot(root);
        for (const s of during.values()) sessions.upsert(s);
      } finally {
        if (duringReload.current === during) duringReload.current = null;
      }
    })();
    void read(first);
  }, [readPage, takePage, read, focus, readLine]);
  useEffect(reload, [reload]);
  useResync(reload);

  /** More trees: the next page of roots, and the next of all sessions to fill them in. */
  const loadMore = () => {
    const { roots, all } = next;
    void read(...(roots === null ? [] : [loadPage(roots, 'roots')]), ...(all === null ? [] : [loadPage(all, 'all')]));
  };

  useEventBatches((batch) => {
    let changed = false;
    for (const e of batch) {
      if (!('session' in e)) continue;
      const s = e.session;
      if (e.type === 'session.evicted') {
        unconfirmed.current.delete(s.session_name);
        checked(s.session_name);
        changed = sessions.evict(s) || changed;
      } else if (stream.isHistory(e) && !sessions.all.has(s.session_name)) {
        unconfirmed.current.set(s.session_name, s);
      } else {
        // a live event says it exists: nothing left to check
        checked(s.session_name);
        changed = keep(s) || changed;
      }
    }
    if (changed) setVersion((v) => v + 1);
    void confirm();
  });

  /** The sessions whose check failed, checked again (each note stays until its answer). */
  const checkAgain = () => {
    for (const { session } of unchecked.values()) unconfirmed.current.set(session.session_name, session);
    void confirm();
  };

  /** Children a node names that are not loaded yet (paging): read them all. */
  const loadChildren = async (parent: string) => {
    const all = async () => {
      let cursor: string | null = null;
      do cursor = await loadPage(cursor, { parent });
      while (cursor !== null);
    };
    await read(all());
  };

  const roots = useMemo(() => {
    const range = listed.current.roots;
    return [...sessions.all.values()]
      .filter((s) => s.parent_session_name === null)
      // an older root (an update of it came live) belongs on a page not read yet: drawn there
      .filter((s) => range === null || covers(range, s.created_at, true) || s.session_name === focusRoot)
      // roots created at the same instant (a batch) in the API's order (`seq`): they were drawn in
      // the order the page came to have them (live: oldest first), another after a reload
      .sort((a, b) => (a.session_name === focusRoot ? -1 : b.session_name === focusRoot ? 1 : byCreation(b, a)));
  }, [version, focusRoot]);

  // one the page has meanwhile (a page read, a live event) exists: nothing left to check
  const failedChecks = [...unchecked].filter(([name]) => !sessions.all.has(name));

  return (
    <section class="view sessions-view">
      <header class="view-head">
        <h1>Sessions</h1>
        <span class="muted">
          {sessions.all.size} loaded{next.roots !== null ? ' (more on the server)' : ''} · {roots.length} trees
        </span>
      </header>
      {error && <ErrorNote>{error}</ErrorNote>}
      {/* a read that failed knows nothing of the sessions: the error says so, not "no sessions yet" */}
      {!loading && !error && roots.length === 0 && (
        <Empty>
          No sessions yet. <a href={link('/start')}>Start one</a>.
        </Empty>
      )}
      {failedChecks.length > 0 && (
        <div data-testid="unchecked-sessions">
          {failedChecks.map(([name, { error: why }]) => (
            <ErrorNote key={name}>
              Session {name}, named by an event from before the page read the sessions, could not be checked: {why}{' '}
              <button type="button" class="link" onClick={checkAgain}>
                check again
              </button>
            </ErrorNote>
          ))}
        </div>
      )}
      <ul class="tree" data-testid="session-tree">
        {roots.slice(0, shown).map((s) => (
          <SessionNode key={s.session_name} session={s} sessions={sessions} focus={focus} onLoadChildren={loadChildren} version={version} />
        ))}
      </ul>
      <nav class="pager">
        {roots.length > shown && (
          <button type="button" onClick={() => setShown((n) => n + ROOTS_SHOWN)}>
            show {Math.min(ROOTS_SHOWN, roots.length - shown)} more of {roots.length - shown}
          </button>
        )}
        {next.roots !== null && (
          <button type="button" disabled={loading} onClick={loadMore}>
            load more sessions
          </button>
        )}
      </nav>
    </section>
  );
}

interface NodeProps {
  session: Session;
  sessions: SessionMap;
  focus: string | null;
  onLoadChildren: (parent: string) => Promise<void>;
  /** the map's change counter: a node re-renders when any session changed */
  version: number;
}

function SessionNode({ session: s, sessions, focus, onLoadChildren, version }: NodeProps) {
  const [open, setOpen] = useState(true);
  const [showJobs, setShowJobs] = useState(focus === s.session_name);
  // children drawn: CHILDREN_SHOWN more per "show more"
  const [shown, setShown] = useState(CHILDREN_SHOWN);
  const now = useNow(10_000);
  // every child the page has read, not only those `s.children` names: it names the newest
  // MAX_SESSION_LIST_ITEMS, and the older ones a page of all sessions or "load more" brings
  // would be read and never drawn
  const children = useMemo(() => sessions.childrenOf(s), [sessions, s, version]);
  // the children counted but not read yet (a coordinator from before the count sends none: its
  // list is whole); "load more" reads every page of them
  const notLoaded = Math.max(0, (s.children_count ?? s.children.length) - children.length);
  const pending = pendingNote(s);
  const hasTree = children.length > 0 || notLoaded > 0;
  return (
    <li class={`node${focus === s.session_name ? ' focus' : ''}`} data-session={s.session_name}>
      <div class="node-row">
        <button
          type="button"
          class="toggle"
          aria-label={open ? 'collapse' : 'expand'}
          disabled={!hasTree}
          onClick={() => setOpen(!open)}
        >
          {hasTree ? (open ? '▾' : '▸') : '·'}
        </button>
        <a class="name" href={link('/jobs', { session: s.session_name })} title="jobs of this session">
          {s.session_name}
        </a>
        <StatusBadge status={s.status} />
        {!s.accepts_input && (
          <span class="badge status-stopped" data-closed="true" title="its start never ran: it takes no more input; start it again">
            closed
          </span>
        )}
        {s.last_job_status && (
          <span class="muted small">
            last job <StatusBadge status={s.last_job_status} />
          </span>
        )}
        {s.agent_name && <span class="muted small">agent {s.agent_name}</span>}
        <span class="usage small" data-testid="usage" title="tokens and cost of this session's jobs">
          usage: {usageText(s.usage, s.cost_usd)}
        </span>
        {hasTree && (
          <span class="usage small tree-usage" title="this session and all its descendants">
            tree: {usageText(s.tree_usage, s.tree_cost_usd)}
          </span>
        )}
        <span class="muted small" title={s.updated_at}>
          {ago(s.updated_at, now)}
        </span>
        <span class="node-actions">
          <button type="button" class="link" onClick={() => setShowJobs(!showJobs)}>
            {showJobs ? 'hide jobs' : `jobs (${s.job_ids_count ?? s.job_ids.length})`}
          </button>
          {s.accepts_input ? (
            <a href={link('/start', { type: 'resume_session', session: s.session_name })}>resume</a>
          ) : (
            <a href={link('/start', { type: 'start_session', session: s.session_name, parent: s.parent_session_name ?? undefined })}>
              start again
            </a>
          )}
          <a href={link('/start', { type: 'start_session', parent: s.session_name })}>+ child</a>
        </span>
      </div>
      {s.callback_job_id && (
        <p class="node-note callback-note">
          ↩ callback <JobLink id={s.callback_job_id} /> is delivering child results to this session
        </p>
      )}
      {pending && (
        <p class="node-note" data-testid="pending">
          {pending}
        </p>
      )}
      {showJobs && <SessionJobs name={s.session_name} />}
      {open && hasTree && (
        <ul class="children">
          {children.slice(0, shown).map((c) => (
            <SessionNode key={c.session_name} session={c} sessions={sessions} focus={focus} onLoadChildren={onLoadChildren} version={version} />
          ))}
          {children.length > shown && (
            <li class="muted small" data-testid="more-children">
              … {children.length - shown} more children{' '}
              <button type="button" class="link" onClick={() => setShown((n) => n + CHILDREN_SHOWN)}>
                show {Math.min(CHILDREN_SHOWN, children.length - shown)} more
              </button>
            </li>
          )}
          {notLoaded > 0 && (
            <li class="muted small" data-testid="unloaded-children">
              … {notLoaded} child session{notLoaded > 1 ? 's' : ''} not loaded{' '}
              <button type="button" class="link" onClick={() => void onLoadChildren(s.session_name)}>
                load {notLoaded} more child session{notLoaded > 1 ? 's' : ''}
              </button>
            </li>
          )}
        </ul>
      )}
    </li>
  );
}

/** The newest jobs of one session, live; callback jobs are marked. */
function SessionJobs({ name }: { name: string }) {
  const { api } = useServices();
  const [list, setList] = useState<JobPage | null>(null);
  const [error, setError] = useState<string | null>(null);
  // events that arrive while the list loads are applied again to the answer, which may be older
  const buffered = useRef<JobEvent[] | null>([]);
  const now = useNow(10_000);
  const filter: JobFilter = { status: '', session: name, launcher: '' };
  // events were lost (a gap in the stream): read the list again, as the tree around it is
  const [reload, setReload] = useState(0);
  useResync(() => setReload((n) => n + 1));
  useEffect(() => {
    const ac = new AbortController();
    buffered.current = [];
    // a read that never answers is given up (ReadTimeout), as the jobs view's are: it would show
    // "loading jobs…" and buffer this session's events for as long as the node is open
    withTimeout(READ_TIMEOUT_MS, ac.signal, `GET /jobs?session_name=${name}`, (signal) =>
      api.get<JobList>('/jobs', { session_name: name, limit: SESSION_JOBS }, signal),
    ).then(
      (l) => {
        // the newest jobs, live as the jobs list's first page is: evicted jobs leave, a job comes
        // in by its creation time when it is within the range listed
        let page: JobPage = { rows: l.jobs, next: l.next_cursor, first: true, shifted: false };
        for (const { job, evicted } of buffered.current ?? []) page = applyJob(page, job, evicted, filter, SESSION_JOBS);
        buffered.current = null;
        setList(page);
        // a read again (a gap) that is answered replaces the error of the one before
        setError(null);
      },
      (err: unknown) => {
        if (ac.signal.aborted) return;
        // no answer to apply them to, and events are not kept for ever: those that came during
        // the read go to the list shown (read before a gap), which stays live under the error;
        // without one, the next read (a gap's, or "read again") is newer than them
        const missed = buffered.current ?? [];
        buffered.current = null;
        if (missed.length > 0) setList((page) => page && missed.reduce((p, { job, evicted }) => applyJob(p, job, evicted, filter, SESSION_JOBS), page));
        setError(describeError(err));
      },
    );
    return () => ac.abort();
  }, [api, name, reload]);
  useEventBatches((batch) => {
    const mine = batch.flatMap((e): JobEvent[] =>
      'job' in e && e.job.session_name === name ? [{ job: e.job, evicted: e.type === 'job.evicted' }] : [],
    );
    if (mine.length === 0) return;
    if (buffered.current !== null) buffered.current.push(...mine);
    else setList((page) => page && mine.reduce((p, { job, evicted }) => applyJob(p, job, evicted, filter, SESSION_JOBS), page));
  });
  const failed = error && (
    <ErrorNote>
      {error}{' '}
      <button
        type="button"
        class="link"
        onClick={() => {
          setError(null);
          setReload((n) => n + 1);
        }}
      >
        read again
      </button>
    </ErrorNote>
  );
  if (list === null) return failed || <p class="muted small">loading jobs…</p>;
  const jobs = list.rows;
  return (
    <>
      {failed}
      <ul class="session-jobs">
        {jobs.map((j) => (
          <li key={j.job_id} data-job-id={j.job_id} data-status={j.status}>
            <JobLink id={j.job_id} /> {j.type === 'start_session' ? 'start' : 'resume'} <CallbackMark job={j} />{' '}
            <StatusBadge status={j.status} /> <span class="muted small">{ago(j.created_at, now)}</span>
          </li>
        ))}
        {jobs.length === 0 && <li class="muted small">no jobs</li>}
        <li>
          <a class="small" href={link('/jobs', { session: name })}>
            all jobs of {name} →
          </a>
        </li>
      </ul>
    </>
  );
}
