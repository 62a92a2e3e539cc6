import { useEffect, useState } from 'preact/hooks';
import { tokenProblem, type AuthProblem } from '../lib/api.js';
import { useServices, useStreamState } from '../lib/context.js';
import { link, useRoute, type Route } from '../lib/router.js';
import { JobView } from './job.js';
import { JobsView } from './jobs.js';
import { LaunchersView } from './launchers.js';
import { SessionsView } from './sessions.js';
import { StartView } from './start.js';

export function App() {
  const route = useRoute();
  const { api, stream } = useServices();
  const [problem, setProblem] = useState<AuthProblem | null>(null);
  const [askToken, setAskToken] = useState(false);
  // a new token re-reads everything: the views remount under a new key
  const [generation, setGeneration] = useState(0);
  useEffect(() => api.onAuthProblem(setProblem), [api]);

  const applyToken = (token: string | null) => {
    api.setToken(token);
    setAskToken(false);
    stream.restart();
    setGeneration((g) => g + 1);
  };

  return (
    <div class="layout">
      <header class="top">
        <a class="brand" href={link('/jobs')}>
          agentq
        </a>
        <nav class="tabs">
          <Tab route={route} names={['jobs', 'job']} href={link('/jobs')} label="Jobs" />
          <Tab route={route} names={['sessions']} href={link('/sessions')} label="Sessions" />
          <Tab route={route} names={['launchers']} href={link('/launchers')} label="Launchers" />
          <Tab route={route} names={['start']} href={link('/start')} label="Start a session" />
        </nav>
        <span class="spacer" />
        <StreamIndicator />
        <button type="button" class="subtle" data-testid="token-button" onClick={() => setAskToken(!askToken)}>
          {api.token === null ? 'Token' : 'Token ✓'}
        </button>
      </header>
      {(problem !== null || askToken) && <TokenPrompt problem={problem} hasToken={api.token !== null} onToken={applyToken} />}
      <main key={generation}>
        <View route={route} />
      </main>
    </div>
  );
}

function Tab({ route, names, href, label }: { route: Route; names: Route['name'][]; href: string; label: string }) {
  const active = names.includes(route.name);
  return (
    <a href={href} class={active ? 'active' : undefined} aria-current={active ? 'page' : undefined}>
      {label}
    </a>
  );
}

function View({ route }: { route: Route }) {
  switch (route.name) {
    case 'jobs':
      return <JobsView query={route.query} />;
    case 'job':
      // a view per job: nothing of the previous job's state may be merged into this one
      return <JobView id={route.id} key={route.id} />;
    case 'sessions':
      return <SessionsView query={route.query} />;
    case 'launchers':
      return <LaunchersView />;
    case 'start':
      return <StartView query={route.query} key={route.query.toString()} />;
    case 'not-found':
      return (
        <p class="note">
          Nothing at <code>{route.path}</code>. <a href={link('/jobs')}>Back to the jobs</a>.
        </p>
      );
  }
}

const STREAM_TEXT = {
  connecting: 'connecting…',
  live: 'live',
  retrying: 'reconnecting…',
  'needs-token': 'needs a token',
} as const;

function StreamIndicator() {
  const state = useStreamState();
  return (
    <span class={`stream stream-${state}`} data-stream-state={state} title="the live event stream (GET /events)">
      <span class="dot" /> {STREAM_TEXT[state]}
    </span>
  );
}

/**
 * Asked once per tab: the token is kept in sessionStorage. A 401 means no or an unknown token;
 * a 403 on a read means the token may not look at this.
 */
function TokenPrompt(props: { problem: AuthProblem | null; hasToken: boolean; onToken: (token: string | null) => void }) {
  const [value, setValue] = useState('');
  const [invalid, setInvalid] = useState<string | null>(null);
  const { problem } = props;
  const why =
    problem === null
      ? 'Enter the bearer token to use with this coordinator.'
      : problem.status === 401
        ? `This coordinator needs a token (${problem.message}).`
        : `This token may not do that (${problem.message}).`;
  return (
    <form
      class="token-prompt"
      data-testid="token-prompt"
      onSubmit={(e) => {
        e.preventDefault();
        const why = tokenProblem(value);
        setInvalid(why);
        if (why === null) props.onToken(value);
      }}
    >
      <p>
        {why} A <strong>reader</strong> token shows everything; a <strong>client</strong> token may also start and stop
        jobs. It is kept in this tab only (session storage).
      </p>
      <input
        type="password"
        name="token"
        autocomplete="off"
        placeholder="token"
        value={value}
        onInput={(e) => setValue(e.currentTarget.value)}
        class={invalid === null ? undefined : 'invalid'}
      />
      <button type="submit" class="primary" disabled={value.trim() === ''}>
        Use token
      </button>
      {props.hasToken && (
        <button type="button" class="subtle" onClick={() => props.onToken(null)}>
          Forget token
        </button>
      )}
      {invalid !== null && (
        <p class="note error" role="alert" data-testid="token-error">
          {invalid}
        </p>
      )}
    </form>
  );
}
