import { existsSync } from 'node:fs';
import { after, before, type TestContext } from 'node:test';
import { AgentqClient } from '@agentq/client';
import { buildApp, loadConfig, type AppDeps, type CoordinatorConfig } from '@agentq/coordinator';
import type { Job, RegisterLauncherRequest } from '@agentq/protocol';
import { chromium, type Browser, type Page } from 'playwright-core';

/** The coordinator's Fastify app, as buildApp returns it. */
export type App = Awaited<ReturnType<typeof buildApp>>;

/** Debian's Chromium (`apt-get install chromium`); AGENTQ_CHROMIUM points elsewhere. */
export const CHROMIUM = process.env['AGENTQ_CHROMIUM'] ?? '/usr/bin/chromium';

/**
 * Flags that work on a machine with no network but loopback: without the background-networking
 * ones Chromium keeps trying to reach Google's hosts. `--headless` comes from `headless: true`
 * and a fresh `--user-data-dir` from playwright itself (a temporary profile per launch).
 */
export const CHROMIUM_ARGS = [
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

/**
 * `false` when the browser tests can run, else why they are skipped. On a developer machine
 * without Chromium they skip with a loud message; in CI (CI=true), where `.ci/run` installs it,
 * a missing browser fails the run instead of skipping quietly.
 */
export function browserSkip(): false | string {
  if (existsSync(CHROMIUM)) return false;
  if (process.env['CI']) {
    throw new Error(`${CHROMIUM} is missing: CI must run the dashboard's browser tests (.ci/run installs chromium)`);
  }
  const why = `${CHROMIUM} is missing: the dashboard's browser tests are SKIPPED (install it: apt-get install chromium)`;
  process.stderr.write(`\n${'!'.repeat(100)}\n!! ${why}\n${'!'.repeat(100)}\n\n`);
  return why;
}

export function launchBrowser(): Promise<Browser> {
  return chromium.launch({ executablePath: CHROMIUM, headless: true, args: CHROMIUM_ARGS });
}

/**
 * The browser of a test file: launched before its first test, closed after its last, unless the
 * browser tests are skipped (`skip` says why, for each test's `skip` option).
 */
export function fileBrowser(): { skip: false | string; browser: () => Browser } {
  const skip = browserSkip();
  let launched: Browser | undefined;
  before(async () => {
    if (!skip) launched = await launchBrowser();
  });
  after(async () => {
    await launched?.close();
  });
  return { skip, browser: () => launched! };
}

export interface Dashboard {
  url: string;
  app: App;
  client: AgentqClient;
  page: Page;
}

export interface Server {
  url: string;
  app: App;
  client: AgentqClient;
  close(): Promise<void>;
}

/**
 * A real coordinator on 127.0.0.1:0 serving the built dashboard, and a real client (without a
 * token: with `config.authTokensFile` set, make clients with the tokens you need). `deps.clock`
 * (a ManualClock) lets a test move time for retention.
 */
export async function startServer(
  options: { config?: Partial<CoordinatorConfig>; deps?: AppDeps } = {},
): Promise<Server> {
  const config = loadConfig({}, { host: '127.0.0.1', port: 0, logLevel: 'silent', pollTimeoutSeconds: 5, databaseUrl: 'memory:', ...options.config });
  const app = await buildApp(config, options.deps);
  await app.listen({ host: config.host, port: config.port });
  const address = app.server.address();
  if (address === null || typeof address === 'string') throw new Error('coordinator did not bind a TCP port');
  const url = `http://127.0.0.1:${address.port}`;
  const client = new AgentqClient({ url });
  return {
    url,
    app,
    client,
    async close() {
      await client.close();
      await app.close();
    },
  };
}

/**
 * startServer() and a page of the dashboard in its own browser context, all closed when the test
 * ends. Errors thrown in the page fail the test. `beforeLoad` prepares the page before it first
 * loads the dashboard (routes that hold answers, a paused clock).
 */
export async function openDashboard(
  t: TestContext,
  browser: Browser,
  options: { config?: Partial<CoordinatorConfig>; deps?: AppDeps; path?: string; beforeLoad?: (page: Page) => Promise<void> } = {},
): Promise<Dashboard> {
  const server = await startServer(options);
  const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  const page = await context.newPage();
  const pageErrors: Error[] = [];
  page.on('pageerror', (err) => pageErrors.push(err));
  t.after(async () => {
    await context.close();
    await server.close();
    if (pageErrors.length > 0) throw new Error(`the page threw: ${pageErrors.map((e) => e.message).join('; ')}`, { cause: pageErrors[0] });
  });
  await options.beforeLoad?.(page);
  await page.goto(`${server.url}/${options.path ?? '#/jobs'}`);
  return { url: server.url, app: server.app, client: server.client, page };
}

/** Resolves once the page's event stream is connected (views are live from then on). */
export async function live(page: Page): Promise<void> {
  await page.locator('[data-stream-state="live"]').waitFor();
}

/** Play a launcher over real HTTP with the project's client: register, take jobs, report. */
export async function fakeLauncher(client: AgentqClient, request: RegisterLauncherRequest = {}) {
  const reg = await client.register({ hostname: 'test-host', executor_type: 'test', ...request });
  const id = reg.launcher_id;
  const hold = { holdSeconds: reg.poll_timeout_seconds };
  return {
    id,
    /** poll once and expect a job */
    async take(): Promise<Job> {
      const answer = await client.poll(id, hold);
      if (!answer?.job) throw new Error(`expected a job, got ${JSON.stringify(answer)}`);
      return answer.job;
    },
    /** poll (at capacity 0) until the coordinator asks to stop `jobId` */
    async stopRequested(jobId: string): Promise<void> {
      for (;;) {
        const answer = await client.poll(id, { ...hold, capacity: 0 });
        if (answer?.stop_jobs?.includes(jobId)) return;
      }
    },
    started: (jobId: string) => client.reportStarted(jobId, { launcher_id: id }),
    output: (jobId: string, offset: number, data: string) => client.reportOutput(jobId, { launcher_id: id, offset, data }),
    completed: (jobId: string, result: string) =>
      client.reportCompleted(jobId, { launcher_id: id, status: 'success', result }),
    stopped: (jobId: string) => client.reportStopped(jobId, { launcher_id: id, signal: 'SIGTERM' }),
  };
}

/**
 * Hold the page's answers to requests matching `url` until `release()`: each is fetched from the
 * coordinator at once (`read` resolves when the first was), then handed to the page, its JSON
 * body changed by `rewrite` first when one is given (a mark the test can see the page take).
 */
export async function holdAnswers<T = unknown>(
  page: Page,
  url: RegExp,
  rewrite?: (body: T) => void,
): Promise<{ read: Promise<void>; release: () => void }> {
  let fetched!: () => void;
  const read = new Promise<void>((resolve) => (fetched = resolve));
  let release!: () => void;
  const released = new Promise<void>((resolve) => (release = resolve));
  await page.route(url, async (route) => {
    const answer = await route.fetch();
    fetched();
    await released;
    if (rewrite === undefined) return route.fulfill({ response: answer });
    const body = (await answer.json()) as T;
    rewrite(body);
    await route.fulfill({ response: answer, json: body });
  });
  return { read, release };
}

/**
 * A gap in the page's event stream: its connection is dropped (every connection of `app`'s
 * server is closed) and its reconnect held until `reconnect()`, which lets it through and
 * resolves once the stream is live again. Resolves once the page shows it is retrying. With a
 * small EVENT_REPLAY_SIZE, events made meanwhile leave the replay window: the page is told of a
 * gap and its views read again.
 */
export async function dropStream(t: TestContext, page: Page, app: App): Promise<{ reconnect: () => Promise<void> }> {
  let release!: () => void;
  const released = new Promise<void>((resolve) => (release = resolve));
  t.after(() => release());
  await page.route(/\/events$/, async (route) => {
    await released;
    await route.continue();
  });
  app.server.closeAllConnections();
  await page.locator('[data-stream-state="retrying"]').waitFor();
  return {
    reconnect: async () => {
      release();
      await live(page);
    },
  };
}
