import type { CreateJobRequest, Job, SessionList } from '@agentq/protocol';
import { useEffect, useState } from 'preact/hooks';
import { ApiError, describeError } from '../lib/api.js';
import { useServices } from '../lib/context.js';
import { parseDuration, parseLabels } from '../lib/format.js';
import { jobLink, navigate } from '../lib/router.js';

type Kind = CreateJobRequest['type'];

interface Fields {
  type: Kind;
  session_name: string;
  prompt: string;
  agent_name: string;
  project_dir: string;
  parent_session_name: string;
  timeout: string;
  requires: string;
}

/** Start a new session or resume one: `POST /jobs`, then the new job's page. */
export function StartView({ query }: { query: URLSearchParams }) {
  const { api } = useServices();
  const [f, setF] = useState<Fields>(() => ({
    type: query.get('type') === 'resume_session' ? 'resume_session' : 'start_session',
    session_name: query.get('session') ?? '',
    prompt: '',
    agent_name: '',
    project_dir: '',
    parent_session_name: query.get('parent') ?? '',
    timeout: '',
    requires: '',
  }));
  const [error, setError] = useState<{ message: string; field?: string } | null>(null);
  const [busy, setBusy] = useState(false);
  const [names, setNames] = useState<string[]>([]);

  useEffect(() => {
    const ac = new AbortController();
    api.get<SessionList>('/sessions', { limit: 200 }, ac.signal).then(
      (l) => setNames(l.sessions.map((s) => s.session_name).slice(0, 200)),
      () => {},
    );
    return () => ac.abort();
  }, [api]);

  const set = (key: keyof Fields) => (e: Event) => setF({ ...f, [key]: (e.currentTarget as HTMLInputElement).value });
  const start = f.type === 'start_session';

  const submit = async (e: Event) => {
    e.preventDefault();
    setError(null);
    const body: CreateJobRequest = { type: f.type, session_name: f.session_name.trim(), prompt: f.prompt };
    if (start) {
      if (f.agent_name.trim()) body.agent_name = f.agent_name.trim();
      if (f.project_dir.trim()) body.project_dir = f.project_dir.trim();
      if (f.parent_session_name.trim()) body.parent_session_name = f.parent_session_name.trim();
    }
    if (f.timeout.trim()) {
      const ms = parseDuration(f.timeout);
      if (ms === null || ms <= 0) return setError({ field: 'timeout_ms', message: 'timeout: use 30s, 5m, 1h30m or milliseconds' });
      body.timeout_ms = ms;
    }
    try {
      const requires = parseLabels(f.requires);
      if (requires) body.requires = requires;
    } catch (err) {
      return setError({ field: 'requires', message: `requires: ${(err as Error).message}` });
    }
    setBusy(true);
    try {
      const job = await api.post<Job>('/jobs', body);
      navigate(jobLink(job.job_id));
    } catch (err) {
      const field = err instanceof ApiError && typeof err.details['field'] === 'string' ? err.details['field'] : undefined;
      setError({ message: describeError(err), ...(field ? { field } : {}) });
    } finally {
      setBusy(false);
    }
  };

  const bad = (name: string) => (error?.field === name ? 'invalid' : undefined);
  return (
    <section class="view start-view">
      <header class="view-head">
        <h1>{start ? 'Start a session' : 'Resume a session'}</h1>
      </header>
      <form class="form" onSubmit={(e) => void submit(e)} data-testid="start-form">
        <fieldset class="radio">
          <label>
            <input type="radio" name="type" value="start_session" checked={start} onChange={set('type')} /> start a new session
          </label>
          <label>
            <input type="radio" name="type" value="resume_session" checked={!start} onChange={set('type')} /> resume a session
          </label>
        </fieldset>
        <label>
          Session name
          <input
            name="session_name"
            required
            maxLength={200}
            list="session-names"
            value={f.session_name}
            onInput={set('session_name')}
            class={bad('session_name')}
            placeholder={start ? 'e.g. research' : 'the session to continue'}
          />
        </label>
        <datalist id="session-names">
          {names.map((n) => (
            <option value={n} key={n} />
          ))}
        </datalist>
        <label>
          Prompt
          <textarea name="prompt" required rows={6} value={f.prompt} onInput={set('prompt')} class={bad('prompt')} />
        </label>
        {start && (
          <div class="row">
            <label>
              <span>Agent <span class="muted">(optional)</span></span>
              <input name="agent_name" value={f.agent_name} onInput={set('agent_name')} class={bad('agent_name')} />
            </label>
            <label>
              <span>Parent session <span class="muted">(optional: reports to it)</span></span>
              <input
                name="parent_session_name"
                list="session-names"
                value={f.parent_session_name}
                onInput={set('parent_session_name')}
                class={bad('parent_session_name')}
              />
            </label>
          </div>
        )}
        {start && (
          <label>
            <span>Project directory <span class="muted">(optional; the launcher's default otherwise)</span></span>
            <input name="project_dir" value={f.project_dir} onInput={set('project_dir')} class={bad('project_dir')} />
          </label>
        )}
        <div class="row">
          <label>
            <span>Timeout <span class="muted">(optional: 30s, 5m, 1h30m)</span></span>
            <input name="timeout" value={f.timeout} onInput={set('timeout')} class={bad('timeout_ms')} />
          </label>
          <label>
            <span>Requires labels <span class="muted">(optional: os=linux, gpu=a100)</span></span>
            <input name="requires" value={f.requires} onInput={set('requires')} class={bad('requires')} />
          </label>
        </div>
        {error && (
          <p class="note error" role="alert" data-testid="form-error">
            {error.message}
          </p>
        )}
        <div class="actions">
          <button type="submit" class="primary" disabled={busy}>
            {busy ? 'Creating…' : start ? 'Start session' : 'Resume session'}
          </button>
        </div>
      </form>
    </section>
  );
}
