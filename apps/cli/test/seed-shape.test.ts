import assert from 'node:assert/strict';
import type { IncomingMessage } from 'node:http';
import { describe, it } from 'node:test';
import type { Launcher, LauncherList, LifecycleEvent } from '@agentq/protocol';
import { renderLaunchers } from '../src/commands/launchers.js';
import { renderEvent } from '../src/commands/watch.js';
import { cli, coordinator, testGatewayServer } from './helpers.js';

/** The job's fields in the seed's API (GET /jobs/{id}); the optional ones may be left out. */
const SEED_JOB_FIELDS = [
  'job_id',
  'type',
  'session_name',
  'agent_name',
  'prompt',
  'project_dir',
  'parent_session_name',
  'status',
  'launcher_id',
  'error',
  'created_at',
  'claimed_at',
  'started_at',
  'completed_at',
];

/** Every job in a JSON answer cut down to the seed's fields, the null ones left out. */
function toSeedShape(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(toSeedShape);
  if (value === null || typeof value !== 'object') return value;
  const o = value as Record<string, unknown>;
  if (typeof o['job_id'] === 'string' && typeof o['session_name'] === 'string' && 'prompt' in o) {
    return Object.fromEntries(SEED_JOB_FIELDS.filter((k) => o[k] !== null && o[k] !== undefined).map((k) => [k, o[k]]));
  }
  return Object.fromEntries(Object.entries(o).map(([k, v]) => [k, toSeedShape(v)]));
}

/**
 * A seed-compatible server: the real coordinator behind a gateway that answers every job in the
 * seed's bare shape (no `result`, `terminal`, `usage`, ... and no null optional fields).
 */
async function seedServer(t: Parameters<typeof coordinator>[0] & object, target: string): Promise<string> {
  const { url } = await testGatewayServer(t, target, (_req, res, forward) =>
    forward((answer: IncomingMessage) => {
      const chunks: Buffer[] = [];
      answer.on('data', (c: Buffer) => chunks.push(c));
      answer.on('end', () => {
        const body = Buffer.concat(chunks).toString('utf8');
        const json = String(answer.headers['content-type']).startsWith('application/json');
        const out = json ? JSON.stringify(toSeedShape(JSON.parse(body))) : body;
        const headers = { ...answer.headers, 'content-length': String(Buffer.byteLength(out)) };
        res.writeHead(answer.statusCode ?? 502, headers);
        res.end(out);
      });
      return true;
    }),
  );
  return url;
}

describe("text output of jobs in the seed's bare shape", () => {
  it('agentq status shows a completed job with no result field, as terminal, without a crash', async (t) => {
    const c = await coordinator(t);
    const job = await c.client.createJob({ type: 'start_session', session_name: 'seedy', prompt: 'x' });
    await c.launcher.claimAndStart();
    await c.launcher.complete(job.job_id);
    const url = await seedServer(t, c.url);

    const json = await cli(url, ['status', job.job_id, '--json']);
    const data = (JSON.parse(json.stdout) as { data: Record<string, unknown> }).data;
    assert.equal('result' in data, false, 'the gateway sends no result');

    const r = await cli(url, ['status', job.job_id]);
    assert.equal(r.stderr, '');
    assert.equal(r.code, 0);
    assert.match(r.stdout, new RegExp(`^${job.job_id} {2}completed$`, 'm'), 'completed is terminal: no "(not terminal)"');
    assert.match(r.stdout, /^ {2}timeout {4}none$/m);
    assert.doesNotMatch(r.stdout, /result:|usage|wait: /);
  });

  it('agentq status of a failed job with no error_code and a pending one with no pending_reason', async (t) => {
    const c = await coordinator(t);
    const failed = await c.client.createJob({ type: 'start_session', session_name: 'broke', prompt: 'x' });
    await c.launcher.claimAndStart();
    await c.launcher.fail(failed.job_id, 'it broke');
    const pending = await c.client.createJob({ type: 'start_session', session_name: 'later', prompt: 'x' });
    const url = await seedServer(t, c.url);

    const f = await cli(url, ['status', failed.job_id]);
    assert.equal(f.code, 4, f.stderr);
    assert.match(f.stdout, /^ {2}error {6}it broke$/m);
    const p = await cli(url, ['status', pending.job_id]);
    assert.equal(p.code, 3, p.stderr);
    assert.match(p.stdout, new RegExp(`^${pending.job_id} {2}pending \\(not terminal\\)$`, 'm'));
    assert.match(p.stdout, /^ {2}wait: {6}agentq wait job_/m);
  });

  it('agentq list and the session tree show seed-shaped jobs', async (t) => {
    const c = await coordinator(t);
    const job = await c.client.createJob({ type: 'start_session', session_name: 'listed', prompt: 'x' });
    await c.launcher.claimAndStart();
    await c.launcher.complete(job.job_id, 'all good');
    const url = await seedServer(t, c.url);

    const list = await cli(url, ['list', '--all']);
    assert.equal(list.code, 0, list.stderr);
    assert.match(list.stdout, new RegExp(`^${job.job_id} {2}completed +start +listed +- +\\S+ ago +-$`, 'm'));
    const tree = await cli(url, ['sessions', 'listed']);
    assert.equal(tree.code, 0, tree.stderr);
    assert.match(tree.stdout, new RegExp(`└─ ${job.job_id} {2}start {5}completed`));
  });
});

describe('text renderers take what an older or newer coordinator leaves out or adds', () => {
  it('watch shows an event of a type it does not know by its type', () => {
    const event = { type: 'budget.spent', at: new Date().toISOString(), budget: { usd: 1 } } as unknown as LifecycleEvent;
    assert.match(renderEvent(event), /^\d\d:\d\d:\d\d {2}budget\.spent$/);
  });

  it('launchers shows a launcher without its lists and heartbeat age', () => {
    const launcher = {
      launcher_id: 'lnch_0123456789ab',
      status: 'online',
      hostname: 'box',
      executor_type: null,
      max_jobs: 2,
    } as unknown as Launcher;
    const text = renderLaunchers({ launchers: [launcher], next_cursor: null } satisfies LauncherList);
    assert.match(text, /^lnch_0123456789ab {2}online {2}box +- +-\/2 +- +- +-$/m);
  });
});
