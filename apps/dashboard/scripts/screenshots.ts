#!/usr/bin/env node
/**
 * `npm run screenshots`: a PNG of each dashboard view into docs/ (shown in the README and in
 * docs/dashboard.md). Starts a coordinator on 127.0.0.1:0, plays two launchers over the client to
 * give it a small, believable history (a session tree with a callback, running, pending, failed
 * and completed jobs, output), and photographs each view in Debian's Chromium.
 */
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { Page } from 'playwright-core';
import { CHROMIUM, fakeLauncher, launchBrowser, live, startServer } from '../test/harness.js';

const docs = fileURLToPath(new URL('../../../../docs/', import.meta.url));
const usage = (input: number, output: number) => ({
  usage: { input_tokens: input, output_tokens: output, cache_read_input_tokens: input * 3, cache_creation_input_tokens: 0 },
  cost_usd: (input * 3 + output * 15) / 1e6,
});

async function main(): Promise<void> {
  if (!existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} is missing: apt-get install chromium`);
  const server = await startServer();
  const { client } = server;
  const browser = await launchBrowser();
  try {
    const a = await fakeLauncher(client, { hostname: 'build-box-1', executor_type: 'claude-code', max_jobs: 4, version: '0.1.0' });
    const b = await fakeLauncher(client, { hostname: 'gpu-box', executor_type: 'claude-code', max_jobs: 2, version: '0.1.0' });
    const start = (session_name: string, prompt: string, extra: Record<string, string> = {}) =>
      client.createJob({ type: 'start_session', session_name, prompt, agent_name: 'researcher', ...extra });
    const run = async (l: typeof a, output: string[]) => {
      const job = await l.take();
      await l.started(job.job_id);
      let offset = 0;
      for (const line of output) {
        await l.output(job.job_id, offset, `${line}\n`);
        offset += Buffer.byteLength(`${line}\n`);
      }
      return job;
    };

    // a finished session, a failed one
    await start('release-notes', 'Draft the release notes for 0.2 from the merged pull requests');
    const notes = await run(a, ['Reading 14 merged pull requests...', 'Grouping changes by area...']);
    await client.reportCompleted(notes.job_id, { launcher_id: a.id, result: 'Release notes drafted in NOTES.md', ...usage(41_200, 2_300) });
    await start('flaky-test', 'Find why the retention test flakes under load');
    const flaky = await run(b, ['Running the test 50 times...']);
    await client.reportFailed(flaky.job_id, { launcher_id: b.id, error: 'claude exited with code 1: rate limited', exit_code: 1 });

    // a tree: research -> research-papers (done, delivered by a callback), research-code (running)
    await start('research', 'Survey quantum error correction and plan a prototype');
    const research = await run(a, ['Planning the survey...', 'Starting two helper sessions']);
    await client.reportCompleted(research.job_id, { launcher_id: a.id, result: 'Plan ready; helpers started', ...usage(18_000, 1_200) });
    await start('research-papers', 'Find the 10 most cited surface-code papers since 2019', { parent_session_name: 'research' });
    await start('research-code', 'Prototype a decoder for the repetition code', { parent_session_name: 'research' });
    const papers = await run(b, ['Searching arXiv...', 'Ranking by citations...']);
    const code = await run(a, ['Reading stim documentation...', 'Writing decoder.py...', 'Running the first simulation...']);
    await client.reportCompleted(papers.job_id, { launcher_id: b.id, result: '10 papers, summarised in papers.md', ...usage(64_000, 5_100) });
    const callback = await run(b, ['Resuming with the results of research-papers']);
    void callback;

    // queued work and a live job with output
    await start('fix-bug-42', 'Fix issue 42: the CLI prints a stack trace on a 404');
    const fix = await run(a, ['Reading apps/cli/src/errors.ts...', 'The 404 path rethrows: writing a test first...', 'Running npm test -- apps/cli...']);
    await client.createJob({ type: 'start_session', session_name: 'docs-pass', prompt: 'Proofread docs/ for words only insiders know' });
    void code;

    const context = await browser.newContext({ viewport: { width: 1280, height: 760 }, colorScheme: 'light', deviceScaleFactor: 1 });
    const page = await context.newPage();
    const shot = async (path: string, ready: (p: Page) => Promise<void>, name: string) => {
      await page.goto(`${server.url}/${path}`);
      await live(page);
      await ready(page);
      await page.screenshot({ path: `${docs}${name}`, fullPage: false });
      console.log(`docs/${name}`);
    };
    await shot('#/jobs', (p) => p.locator('tbody tr[data-job-id]').nth(7).waitFor(), 'dashboard-jobs.png');
    await shot(`#/jobs/${fix.job_id}`, (p) => p.getByTestId('output').getByText('Running npm test').waitFor(), 'dashboard-job.png');
    await shot(
      '#/sessions?focus=research',
      (p) => p.locator('[data-session="research"] .session-jobs [data-callback="true"]').waitFor(),
      'dashboard-sessions.png',
    );
    await shot('#/launchers', (p) => p.locator('tr[data-launcher-id]').nth(1).waitFor(), 'dashboard-launchers.png');
    await shot(
      '#/start?type=start_session&parent=research',
      async (p) => {
        await p.locator('input[name="session_name"]').fill('research-benchmarks');
        await p.locator('textarea[name="prompt"]').fill('Benchmark the decoder against the published thresholds');
      },
      'dashboard-start.png',
    );
    await context.close();
  } finally {
    await browser.close();
    await server.close();
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
