/**
 * The async job protocol, checked end to end against a real coordinator: the start
 * command returns the full descriptor, and `status` exits with the job's state.
 */
import assert from 'node:assert/strict';
import { copyFileSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it, type TestContext } from 'node:test';
import selfsigned from 'selfsigned';
import { CliCommandData, CliEnvelope, CliFailure, type CliEnvelope as Envelope, type JobDescriptor } from '@agentq/protocol';
import { cli, coordinator, deadUrl, envelope } from './helpers.js';

type DescriptorEnvelope = Extract<Envelope<JobDescriptor>, { ok: true }>;
const DescriptorSchema = CliEnvelope(CliCommandData.status);

async function startJob(url: string | undefined, session: string, extra: string[] = []): Promise<JobDescriptor> {
  const r = await cli(url, ['start', session, '-p', 'do the thing', '--json', ...extra]);
  assert.equal(r.code, 0, r.stdout + r.stderr);
  return envelope<DescriptorEnvelope>(r, DescriptorSchema).data;
}

async function status(url: string, jobId: string): Promise<{ code: number; data: JobDescriptor }> {
  const r = await cli(url, ['status', jobId, '--json']);
  const env = envelope<DescriptorEnvelope>(r, DescriptorSchema);
  assert.equal(env.ok, true);
  assert.equal(env.data.exit_code, r.code, 'the descriptor states the exit code');
  return { code: r.code, data: env.data };
}

/** A coordinator over https with a self-signed certificate, `ca` its file, in the folder `dir`. */
async function httpsCoordinator(t: TestContext): Promise<{ url: string; ca: string; dir: string }> {
  const dir = mkdtempSync(join(tmpdir(), 'agentq-cli-tls-'));
  t.after(() => rmSync(dir, { recursive: true, force: true, maxRetries: 5 }));
  const pems = await selfsigned.generate([{ name: 'commonName', value: 'agentq test coordinator' }], {
    keyType: 'ec',
    algorithm: 'sha256',
    extensions: [
      { name: 'basicConstraints', cA: true },
      { name: 'subjectAltName', altNames: [{ type: 7, ip: '127.0.0.1' }] },
    ],
  });
  const ca = join(dir, 'ca file.pem');
  writeFileSync(ca, pems.cert);
  writeFileSync(join(dir, 'key.pem'), pems.private);
  const { url } = await coordinator(t, { tlsCertFile: ca, tlsKeyFile: join(dir, 'key.pem') });
  assert.match(url, /^https:/);
  return { url, ca, dir };
}

describe('the async job protocol: descriptor and exit codes', () => {
  it('start returns the full job descriptor', async (t) => {
    const { url } = await coordinator(t);
    const d = await startJob(url, 'alpha', ['--timeout', '10m', '--agent', 'coder']);
    assert.match(d.job_id, /^job_[0-9a-f]{12}$/);
    assert.equal(d.status, 'pending');
    assert.equal(d.terminal, false);
    assert.equal(d.status_command, `agentq status ${d.job_id} --json`);
    assert.equal(d.cancel_command, `agentq cancel ${d.job_id} --json`);
    assert.equal(d.wait_command, `agentq wait ${d.job_id} --json`);
    assert.ok(d.poll_interval_ms > 0);
    assert.equal(d.timeout_ms, 600_000);
    assert.equal(d.agent_name, 'coder');
    assert.ok(Date.parse(d.created_at) > 0);
    assert.equal(d.exit_code, 3);
  });

  it('the follow-up commands repeat --url and --ca-file given as flags, and work as printed', async (t) => {
    const { url, ca } = await httpsCoordinator(t);
    const d = await startJob(undefined, 'alpha', ['--url', url, '--ca-file', ca]);
    assert.equal(d.status_command, `agentq status ${d.job_id} --url ${url} --ca-file '${ca}' --json`);
    for (const command of [d.status_command, d.wait_command.replace(' --json', ' --timeout 0 --json')]) {
      // the printed command, split as a shell would (the path is quoted for its space)
      const args = command.match(/'[^']*'|\S+/g)!.slice(1).map((w) => w.replace(/^'(.*)'$/, '$1'));
      const r = await cli(undefined, args);
      assert.equal(r.code, 3, `${command}: ${r.stdout}${r.stderr}`);
    }
  });

  it('--ca-file takes a CA file named like a command when there is one (`--ca-file list status <job>`), and says it took the command when there is none', async (t) => {
    const { url, ca, dir } = await httpsCoordinator(t);
    const d = await startJob(undefined, 'alpha', ['--url', url, '--ca-file', ca]);
    // the CLI reads a relative --ca-file from its working directory, which is this process's
    const cwd = process.cwd();
    process.chdir(dir);
    t.after(() => process.chdir(cwd));

    copyFileSync(ca, join(dir, 'list'));
    const r = await cli(undefined, ['--url', url, '--ca-file', 'list', 'status', d.job_id, '--json']);
    assert.equal(r.code, 3, r.stdout + r.stderr);
    const status = envelope<DescriptorEnvelope>(r, DescriptorSchema).data;
    assert.equal(status.job_id, d.job_id);
    assert.equal(status.status_command, `agentq status ${d.job_id} --url ${url} --ca-file ${join(dir, 'list')} --json`);

    rmSync(join(dir, 'list'));
    const missing = await cli(undefined, ['--url', url, '--ca-file', 'list', 'status', d.job_id]);
    assert.equal(missing.code, 2);
    assert.equal(missing.stderr, "agentq: option '--ca-file <path>' argument missing: it took the command 'list' as its value\nRun 'agentq --help' for usage.\n");

    // --url takes no file: a file named like the command changes nothing
    writeFileSync(join(dir, 'status'), '');
    const urlTookIt = await cli(undefined, ['--url', 'status', d.job_id]);
    assert.equal(urlTookIt.code, 2);
    assert.equal(urlTookIt.stderr, "agentq: option '--url <url>' argument missing: it took the command 'status' as its value\nRun 'agentq --help' for usage.\n");
  });

  it('a CA file with no certificate in it (the key given by mistake) is a usage error naming it (exit 2), not an unreachable coordinator', async (t) => {
    const { url, ca, dir } = await httpsCoordinator(t);
    const key = join(dir, 'key.pem');
    const r = await cli(undefined, ['health', '--url', url, '--ca-file', key]);
    assert.equal(r.code, 2, r.stdout + r.stderr);
    assert.match(r.stderr, /^agentq: the CA file .*key\.pem holds no PEM certificate .*it holds a private key.* \(--ca-file or AGENTQ_CA_FILE\)/);
    const fromEnv = await cli(undefined, ['health', '--url', url, '--json'], { env: { AGENTQ_CA_FILE: key } });
    assert.equal(fromEnv.code, 2);
    assert.match(envelope<{ ok: false; error: { message: string } }>(fromEnv, CliFailure).error.message, /holds no PEM certificate/);
    // the certificate itself works
    const good = await cli(undefined, ['health', '--url', url, '--ca-file', ca]);
    assert.equal(good.code, 0, good.stdout + good.stderr);
  });

  it('a coordinator reached but refused by TLS (certificate not trusted, https:// for plain HTTP) says what to fix, not "is the coordinator running?"', async (t) => {
    const { url } = await httpsCoordinator(t);
    const untrusted = await cli(undefined, ['health', '--url', url]);
    assert.equal(untrusted.code, 1, untrusted.stdout + untrusted.stderr);
    assert.match(untrusted.stderr, /unreachable: self-signed certificate \(coordinator_unreachable\)\n/);
    assert.match(untrusted.stderr, /TLS certificate is not trusted here: give the CA certificate that signed it with --ca-file or AGENTQ_CA_FILE/);
    assert.doesNotMatch(untrusted.stderr, /is the coordinator running/);
    const json = await cli(undefined, ['health', '--url', url, '--json']);
    const failure = envelope<{ ok: false; error: { code: string; details?: Record<string, unknown> } }>(json, CliFailure);
    assert.deepEqual([failure.error.code, failure.error.details], ['coordinator_unreachable', { tls_error: 'DEPTH_ZERO_SELF_SIGNED_CERT' }]);

    const plain = await coordinator(t);
    const wrongScheme = await cli(undefined, ['health', '--url', plain.url.replace(/^http:/, 'https:')]);
    assert.equal(wrongScheme.code, 1);
    assert.match(wrongScheme.stderr, /does not speak TLS: use an http:\/\/ URL/);
    // a coordinator that is not there keeps its own hint
    const down = await cli(undefined, ['health', '--url', await deadUrl()]);
    assert.match(down.stderr, /is the coordinator running\?/);
  });

  it('status exits 3 right after start, 3 while running, then 0 once completed', async (t) => {
    const { url, launcher } = await coordinator(t);
    const d = await startJob(url, 'alpha');

    const first = await status(url, d.job_id);
    assert.equal(first.code, 3);
    assert.equal(first.data.terminal, false);

    await launcher.claimAndStart();
    const running = await status(url, d.job_id);
    assert.equal(running.code, 3);
    assert.equal(running.data.status, 'running');

    await launcher.complete(d.job_id, 'the answer');
    const done = await status(url, d.job_id);
    assert.equal(done.code, 0);
    assert.equal(done.data.status, 'completed');
    assert.equal(done.data.terminal, true);
    assert.equal(done.data.result, 'the answer');
  });

  it('status exits 4 for a failed job', async (t) => {
    const { url, launcher } = await coordinator(t);
    const d = await startJob(url, 'alpha');
    await launcher.claimAndStart();
    await launcher.fail(d.job_id, 'executor crashed');
    const s = await status(url, d.job_id);
    assert.equal(s.code, 4);
    assert.equal(s.data.status, 'failed');
    assert.equal(s.data.error, 'executor crashed');
  });

  it('status exits 5 for an unknown job, with a job_not_found envelope', async (t) => {
    const { url } = await coordinator(t);
    const r = await cli(url, ['status', 'job_0123456789ab', '--json']);
    assert.equal(r.code, 5);
    const env = envelope<{ ok: false; error: { code: string } }>(r, CliFailure);
    assert.equal(env.error.code, 'job_not_found');
  });

  it('status exits 7 once the job ran out of its timeout', async (t) => {
    const { url } = await coordinator(t);
    const d = await startJob(url, 'alpha', ['--timeout', '50ms']);
    const w = await cli(url, ['wait', d.job_id]);
    assert.equal(w.code, 7, w.stdout + w.stderr);
    const s = await status(url, d.job_id);
    assert.equal(s.code, 7);
    assert.equal(s.data.status, 'timed_out');
  });

  it('status exits 6 once the job was cancelled', async (t) => {
    const { url } = await coordinator(t);
    const d = await startJob(url, 'alpha');
    const c = await cli(url, ['cancel', d.job_id]);
    assert.equal(c.code, 0, c.stderr);
    const s = await status(url, d.job_id);
    assert.equal(s.code, 6);
    assert.equal(s.data.status, 'stopped');
  });

  it('exits 1 with coordinator_unreachable when nothing answers', async () => {
    const r = await cli(await deadUrl(), ['status', 'job_0123456789ab', '--json']);
    assert.equal(r.code, 1);
    assert.equal(envelope<{ ok: false; error: { code: string } }>(r, CliFailure).error.code, 'coordinator_unreachable');
  });

  it('exits 2 with usage_error for a bad command line', async () => {
    const r = await cli(await deadUrl(), ['status', '--json']);
    assert.equal(r.code, 2);
    assert.equal(envelope<{ ok: false; error: { code: string } }>(r, CliFailure).error.code, 'usage_error');
  });
});
