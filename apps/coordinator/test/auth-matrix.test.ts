import assert from 'node:assert/strict';
import { test } from 'node:test';
import { request } from 'undici';
import { Roles, type Role } from '@agentq/protocol';
import { buildApp } from '../src/app.js';
import { loadConfig } from '../src/config.js';
import { accessOf, ROUTE_ACCESS, type RouteAccess } from '../src/http/auth/route-access.js';
import { credentialedLauncher, startAuthTest, type AuthTest, type CredentialedLauncher } from './auth-helpers.js';

/**
 * Every route the app registered x every kind of caller: no token (401), a role the access table
 * does not allow (403), an allowed one (success). The routes come from the app itself, so a new
 * endpoint is walked as soon as it exists; the table is ROUTE_ACCESS, the same one the docs'
 * role table is made from (docs-roles.test.ts).
 */
type Who = 'nobody' | Role | 'launcher credential';
const CALLERS: readonly Who[] = ['nobody', ...Roles, 'launcher credential'];

interface Call {
  method: string;
  path: string;
  body?: unknown;
  /** the token for the launcher-credential caller, when the call is about another launcher */
  credential?: string;
}

interface Fixtures {
  a: AuthTest;
  launcher: CredentialedLauncher;
  /** a job of a new session, still pending */
  pendingJob(): Promise<string>;
  /** a job claimed by the fixture launcher */
  claimedJob(): Promise<string>;
}

let sessions = 0;

/** A request that succeeds when the caller may make it. Routes without one get a generic request. */
const SAMPLES: Record<string, (f: Fixtures, who: Who) => Promise<Call>> = {
  'POST /jobs': async () => ({ method: 'POST', path: '/jobs', body: { type: 'start_session', session_name: `m${++sessions}`, prompt: 'p' } }),
  'GET /jobs': async () => ({ method: 'GET', path: '/jobs?limit=1' }),
  'POST /jobs/wait': async (f) => ({ method: 'POST', path: '/jobs/wait', body: { job_ids: [await f.pendingJob()], timeout_ms: 0 } }),
  'GET /jobs/:job_id': async (f) => ({ method: 'GET', path: `/jobs/${await f.pendingJob()}` }),
  'GET /jobs/:job_id/wait': async (f) => ({ method: 'GET', path: `/jobs/${await f.pendingJob()}/wait?timeout_ms=0` }),
  'GET /jobs/:job_id/output': async (f) => ({ method: 'GET', path: `/jobs/${await f.pendingJob()}/output` }),
  'POST /jobs/:job_id/stop': async (f) => ({ method: 'POST', path: `/jobs/${await f.pendingJob()}/stop` }),
  'GET /sessions': async () => ({ method: 'GET', path: '/sessions' }),
  'GET /sessions/:session_name': async (f) => {
    const job = await f.a.as.admin.getJob(await f.pendingJob());
    return { method: 'GET', path: `/sessions/${job.session_name}` };
  },
  'POST /sessions/:session_name/stop': async (f) => {
    const job = await f.a.as.admin.getJob(await f.pendingJob());
    return { method: 'POST', path: `/sessions/${job.session_name}/stop` };
  },
  'POST /launcher/register': async () => ({ method: 'POST', path: '/launcher/register', body: { hostname: 'matrix' } }),
  'GET /launcher/jobs': async (f) => ({ method: 'GET', path: `/launcher/jobs?launcher_id=${f.launcher.id}&capacity=0` }),
  'POST /launcher/heartbeat': async (f) => ({ method: 'POST', path: '/launcher/heartbeat', body: { launcher_id: f.launcher.id } }),
  'POST /launcher/jobs/:job_id/started': async (f) => report(f, 'started', {}),
  'POST /launcher/jobs/:job_id/completed': async (f) => report(f, 'completed', { result: 'r' }),
  'POST /launcher/jobs/:job_id/failed': async (f) => report(f, 'failed', { error: 'e' }),
  'POST /launcher/jobs/:job_id/stopped': async (f) => {
    const call = await report(f, 'stopped', { signal: 'SIGTERM' });
    await f.a.as.admin.stopJob(call.path.split('/')[3]!); // claimed -> stopping: a stopped report is due
    return call;
  },
  'POST /launcher/jobs/:job_id/output': async (f) => report(f, 'output', { offset: 0, data: 'hello' }),
  'GET /launchers': async () => ({ method: 'GET', path: '/launchers' }),
  'DELETE /launchers/:launcher_id': async (f) => {
    // a launcher of its own: the caller deletes it (the launcher credential: itself)
    const other = await credentialedLauncher(f.a, 'to-delete');
    return { method: 'DELETE', path: `/launchers/${other.id}?self=true`, credential: other.token };
  },
  'GET /events': async () => ({ method: 'GET', path: '/events' }),
  'GET /health': async () => ({ method: 'GET', path: '/health' }),
  'GET /ready': async () => ({ method: 'GET', path: '/ready' }),
  'GET /openapi.json': async () => ({ method: 'GET', path: '/openapi.json' }),
};

async function report(f: Fixtures, kind: string, body: Record<string, unknown>): Promise<Call> {
  const jobId = await f.claimedJob();
  return { method: 'POST', path: `/launcher/jobs/${jobId}/${kind}`, body: { launcher_id: f.launcher.id, ...body } };
}

/** A request for a route with no sample: its path parameters filled with a placeholder. */
const generic = (method: string, url: string): Call => ({
  method,
  path: url.replace(/:[A-Za-z_]+/g, 'x').replace('*', 'x'),
  ...(method === 'GET' || method === 'DELETE' ? {} : { body: {} }),
});

function tokenOf(f: Fixtures, who: Who, call: Call): string | undefined {
  if (who === 'nobody') return undefined;
  if (who === 'launcher credential') return call.credential ?? f.launcher.token;
  return f.a.secrets[who];
}

function allowed(access: RouteAccess, who: Who): boolean {
  if (access.public) return true;
  if (who === 'nobody') return false;
  if (who === 'launcher credential') return access.launcher !== undefined;
  return access.roles.includes(who);
}

test('every route x every caller: 401 without a token, 403 for a role the table does not allow, success otherwise', async (t) => {
  const a = await startAuthTest(t, { pollTimeoutSeconds: 0.05 });
  const launcher = await credentialedLauncher(a);
  const f: Fixtures = {
    a,
    launcher,
    pendingJob: async () => (await a.as.client.createJob({ type: 'start_session', session_name: `m${++sessions}`, prompt: 'p' })).job_id,
    async claimedJob() {
      const id = await this.pendingJob();
      await launcher.claim(id);
      return id;
    },
  };

  const routes = a.c.app.auth.routes.filter((r) => r.method !== 'HEAD');
  // the routes of today: a route that vanished from the app but not from the table is noticed too
  for (const key of Object.keys(SAMPLES)) {
    assert.ok(routes.some((r) => `${r.method} ${r.url}` === key), `sample for ${key}, which the app does not register`);
  }
  const outcomes: string[] = [];
  for (const route of routes) {
    const key = `${route.method} ${route.url}`;
    assert.ok(accessOf(route.method, route.url), `${key} has no entry in ROUTE_ACCESS (nor a public prefix)`);
    for (const who of CALLERS) {
      const sample = SAMPLES[key];
      const call = sample ? await sample(f, who) : generic(route.method, route.url);
      const token = tokenOf(f, who, call);
      const res = await request(`${a.c.url}${call.path}`, {
        method: call.method as 'GET',
        headers: {
          ...(token ? { authorization: `Bearer ${token}` } : {}),
          ...(call.body !== undefined ? { 'content-type': 'application/json' } : {}),
        },
        ...(call.body !== undefined ? { body: JSON.stringify(call.body) } : {}),
      });
      // an event stream never ends: its headers are the answer
      const text = route.url === '/events' && res.statusCode === 200 ? (res.body.destroy(), '') : await res.body.text();
      const where = `${key} as ${who}: ${res.statusCode} ${text.slice(0, 200)}`;
      if (allowed(route.access, who)) {
        if (sample) assert.ok(res.statusCode >= 200 && res.statusCode < 300, where);
        else assert.ok(res.statusCode !== 401 && res.statusCode !== 403, where);
      } else if (who === 'nobody') {
        assert.equal(res.statusCode, 401, where);
        assert.equal(JSON.parse(text).error.code, 'unauthorized', where);
        assert.match(String(res.headers['www-authenticate']), /^Bearer/, where);
      } else {
        assert.equal(res.statusCode, 403, where);
        assert.equal(JSON.parse(text).error.code, 'forbidden', where);
      }
      outcomes.push(`${key} ${who} ${res.statusCode}`);
    }
  }
  // every registered route was walked with every caller
  assert.equal(outcomes.length, routes.length * CALLERS.length);
});

test('a route missing from the access table stops the app from building', async (t) => {
  const app = await buildApp(loadConfig({}, { logLevel: 'silent' }));
  t.after(() => app.close());
  assert.throws(() => app.get('/not-in-the-table', async () => 'x'), /no access rule: add it to ROUTE_ACCESS/);
});

test('the access table keeps to the roles as documented: readers read, the launcher role only registers, admins do everything', () => {
  for (const [key, access] of Object.entries(ROUTE_ACCESS)) {
    const [method, url] = key.split(' ') as [string, string];
    if (access.public) {
      assert.ok(['/health', '/ready', '/openapi.json', '/', '/index.html'].includes(url) && method === 'GET', `${key} is public`);
      continue;
    }
    assert.ok(access.roles.includes('admin'), `admin may call ${key}`);
    if (access.roles.includes('reader')) {
      assert.ok(method === 'GET' || key === 'POST /jobs/wait', `reader may only read, not ${key}`);
      assert.ok(access.roles.includes('client'), `client may do what reader may: ${key}`);
    }
    if (access.roles.includes('launcher')) assert.equal(key, 'POST /launcher/register');
    if (access.launcher) assert.ok(url.startsWith('/launcher/') || key === 'DELETE /launchers/:launcher_id', `launcher credential on ${key}`);
    if (url.startsWith('/launcher/') && key !== 'POST /launcher/register') assert.ok(access.launcher, `${key} takes the launcher credential`);
    if (key === 'DELETE /launchers/:launcher_id') assert.deepEqual(access.roles, ['admin']);
  }
});
