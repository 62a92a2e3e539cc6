import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { CliCommandData, CliEnvelope, CliFailure, type CliFailure as Failure } from '@agentq/protocol';
import { cli, deadUrl, envelope } from './helpers.js';

const usageError = async (argv: string[]) => {
  const r = await cli(await deadUrl(), [...argv, '--json']);
  assert.equal(r.code, 2, `${argv.join(' ')}: ${r.stdout}`);
  const env = envelope<Failure>(r, CliFailure);
  assert.equal(env.error.code, 'usage_error');
  return env.error.message;
};

describe('command line', () => {
  it('--help lists the commands and the exit codes, exit 0', async () => {
    const r = await cli(undefined, ['--help']);
    assert.equal(r.code, 0);
    for (const c of [
      'start',
      'resume',
      'status',
      'wait',
      'cancel',
      'list',
      'output',
      'launchers',
      'sessions',
      'send',
      'health',
      'watch',
    ]) {
      assert.match(r.stdout, new RegExp(`^  ${c} `, 'm'));
    }
    for (const line of [
      '3  still running',
      '4  failed',
      '5  job not found',
      '6  stopped',
      '7  timed out',
      '2  usage error',
    ]) {
      assert.ok(r.stdout.includes(line), line);
    }
  });

  it('<command> --help and help <command> show the command, exit 0', async () => {
    const a = await cli(undefined, ['wait', '--help']);
    const b = await cli(undefined, ['help', 'wait']);
    assert.equal(a.code, 0);
    assert.equal(b.code, 0);
    assert.match(a.stdout, /^Usage: agentq wait <job_id\.\.\.> \[--all\]/);
    assert.equal(a.stdout, b.stdout);
  });

  it('start --help and resume --help say that a --wait failing once the job exists names the job: error.job, agentq wait <job_id>', async () => {
    for (const command of ['start', 'resume']) {
      const r = await cli(undefined, [command, '--help']);
      assert.equal(r.code, 0);
      const help = r.stdout.replace(/\s+/g, ' ');
      assert.match(help, /A --wait that fails once the job exists .* names the job: in error\.job with --json/, command);
      assert.match(help, /follow it with: agentq wait <job_id>/, command);
    }
  });

  it('--help --json is one envelope', async () => {
    const r = await cli(undefined, ['status', '--help', '--json']);
    assert.equal(r.code, 0);
    const env = envelope<{ ok: true; data: { help: string } }>(r, CliEnvelope(CliCommandData.help));
    assert.match(env.data.help, /^Usage: agentq status \[options\] <job_id>$/m);
  });

  it('rejects a missing or unknown command', async () => {
    assert.match(await usageError([]), /missing command/);
    assert.match(await usageError(['frobnicate']), /unknown command 'frobnicate'/);
    assert.match(await usageError(['help', 'frobnicate']), /unknown command 'frobnicate'/);
  });

  it('rejects unknown flags and missing arguments', async () => {
    assert.match(await usageError(['status', 'job_0123456789ab', '--nope']), /--nope/);
    assert.match(await usageError(['status']), /missing required argument 'job_id'/);
    assert.match(
      await usageError(['status', 'job_0123456789ab', 'job_0123456789ac']),
      /too many arguments for 'status'/,
    );
    assert.match(await usageError(['wait']), /missing required argument 'job_id'/);
    assert.match(await usageError(['start', 'alpha']), /missing -p <prompt>/);
    assert.match(await usageError(['list', 'extra']), /too many arguments for 'list'/);
  });

  it('rejects an empty job id, session name or launcher id, naming the argument, before anything is sent', async () => {
    // `agentq wait "$id"` with id unset: a usage error of the CLI, not the coordinator's
    // validation_failed on a field the user never typed (job_ids[0]), nor exit 5
    const empty = /it is empty: give a (job id|session name|launcher id)/;
    for (const argv of [
      ['status', ''],
      ['wait', ''],
      ['wait', 'job_0123456789ab', ' '],
      ['cancel', 'job_0123456789ab', ''],
      ['output', ''],
      ['sessions', ''],
      ['session', 'stop', ''],
      ['send', '', 'hello'],
      ['launchers', 'rm', ''],
      ['start', '', '-p', 'x'],
      ['resume', '', '-p', 'x'],
      ['start', 'alpha', '-p', 'x', '--parent', ''],
    ]) {
      assert.match(await usageError(argv), empty, argv.join(' '));
    }
    assert.match(await usageError(['status', '']), /argument 'job_id'/);
    // an empty filter would select everything: refused too
    for (const argv of [
      ['list', '--session', ''],
      ['list', '--launcher', ''],
      ['sessions', '--parent', ''],
      ['watch', '--job', ''],
      ['watch', '--session', ''],
    ]) {
      assert.match(await usageError(argv), /option '--\w+ <\w+>' argument '' is invalid\. it is empty/, argv.join(' '));
    }
  });

  it('rejects bad durations and numbers', async () => {
    assert.match(await usageError(['start', 'alpha', '-p', 'x', '--timeout', '5x']), /not a duration/);
    assert.match(await usageError(['start', 'alpha', '-p', 'x', '--timeout', '0']), /at least 1ms/);
    assert.match(await usageError(['wait', 'job_0123456789ab', '--timeout', 'soon']), /not a duration/);
    assert.match(await usageError(['list', '--limit', '0']), /--limit/);
    assert.match(await usageError(['output', 'job_0123456789ab', '--tail', '-1']), /--tail/);
  });

  it('suggests the command or option that was meant', async () => {
    assert.match(
      await usageError(['stauts', 'job_0123456789ab']),
      /unknown command 'stauts'\n\(Did you mean status\?\)/,
    );
    assert.match(
      await usageError(['list', '--sesion', 'a']),
      /unknown option '--sesion'\n\(Did you mean --session\?\)/,
    );
    assert.match(await usageError(['sesions']), /Did you mean sessions\?/);
  });

  it('--version works alone, after a command, and after its options', async () => {
    const version = (
      JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }
    ).version;
    for (const argv of [
      ['--version'],
      ['-V'],
      ['status', '--version'],
      ['list', '--all', '--version'],
      ['session', 'stop', '-V'],
    ]) {
      const r = await cli(undefined, argv);
      assert.equal(r.code, 0, argv.join(' '));
      assert.equal(r.stdout, `agentq ${version}\n`, argv.join(' '));
    }
    const json = await cli(undefined, ['--version', '--json']);
    assert.deepEqual(JSON.parse(json.stdout), { ok: true, data: { version } });
  });

  it("global options go anywhere, also after a command's own options", async () => {
    const url = await deadUrl();
    for (const argv of [
      ['list', '--all', '--json', '--url', url],
      ['list', '--status', 'failed', '--url', url, '--json'],
      ['--json', 'list', '--session', 'a', '--url', url],
    ]) {
      const r = await cli(undefined, argv);
      assert.equal(r.code, 1, argv.join(' '));
      assert.equal(envelope<Failure>(r, CliFailure).error.code, 'coordinator_unreachable', argv.join(' '));
    }
  });

  it('help reaches nested commands; the main help lists them by full name', async () => {
    const a = await cli(undefined, ['help', 'session', 'stop']);
    const b = await cli(undefined, ['session', 'stop', '--help']);
    assert.equal(a.code, 0);
    assert.equal(a.stdout, b.stdout);
    assert.match(a.stdout, /^Usage: agentq session stop \[options\] <session>$/m);
    const main = await cli(undefined, ['--help']);
    for (const line of [
      'session stop <session>',
      'launchers rm <launcher_id>',
      'token create <name>',
      'completion <shell>',
    ]) {
      assert.match(main.stdout, new RegExp(`^  ${line.replace(/[[\]]/g, '\\$&')} `, 'm'), line);
    }
  });

  it('rejects a coordinator URL that is not http(s)', async () => {
    assert.match(await usageError(['list', '--url', 'ftp://x']), /must be http/);
    assert.match(await usageError(['list', '--url', 'not a url']), /not a URL/);
    // a path would be dropped by the client (it sends every path from the root): refused, exit 2
    assert.match(await usageError(['list', '--url', 'http://127.0.0.1:8765/api']), /no path or query/);
    assert.match(await usageError(['list', '--url', 'http://127.0.0.1:8765?x=1']), /no path or query/);
  });

  it('refuses a CA file that cannot be read, from --ca-file or AGENTQ_CA_FILE, as a usage error (exit 2)', async () => {
    assert.match(await usageError(['list', '--ca-file', '/nonexistent/ca.pem']), /cannot read the CA file \/nonexistent\/ca\.pem/);
    const r = await cli('http://127.0.0.1:8765', ['health', '--json'], { env: { AGENTQ_CA_FILE: '/nonexistent/ca.pem' } });
    assert.equal(r.code, 2);
    assert.match(envelope<Failure>(r, CliFailure).error.message, /cannot read the CA file .*AGENTQ_CA_FILE/);
  });

  it('prints usage errors on stderr without --json', async () => {
    const r = await cli(undefined, ['status']);
    assert.equal(r.code, 2);
    assert.equal(r.stdout, '');
    assert.match(r.stderr, /^agentq: missing required argument 'job_id'\nRun 'agentq status --help' for usage\.\n$/);
  });

  it("an error in a global option given after the command points at that command's help, one given before it at agentq --help", async () => {
    for (const [argv, message, help] of [
      [['status', 'job_0123456789ab', '--url'], "option '--url <url>' argument missing", 'agentq status --help'],
      [['list', '--token'], "option '--token <token>' argument missing", 'agentq list --help'],
      [['session', 'stop', 'alpha', '--ca-file'], "option '--ca-file <path>' argument missing", 'agentq session stop --help'],
      [['status', 'job_0123456789ab', '--bogus'], "unknown option '--bogus'", 'agentq status --help'],
      [['--url'], "option '--url <url>' argument missing", 'agentq --help'],
      [['--bogus', 'status', 'job_0123456789ab'], "unknown option '--bogus'", 'agentq --help'],
    ] as const) {
      const r = await cli(undefined, [...argv]);
      assert.equal(r.code, 2, argv.join(' '));
      assert.equal(r.stdout, '', argv.join(' '));
      assert.equal(r.stderr, `agentq: ${message}\nRun '${help}' for usage.\n`, argv.join(' '));
    }
  });

  it('a global option that took the command or another option as its value is named as missing its value', async () => {
    const url = await deadUrl();
    for (const [argv, message, help] of [
      // not "unknown command 'job_…'": --url took `status`
      [['--url', 'status', 'job_0123456789ab'], "option '--url <url>' argument missing: it took the command 'status' as its value", 'agentq --help'],
      // not "missing command"
      [['--token', 'list'], "option '--token <token>' argument missing: it took the command 'list' as its value", 'agentq --help'],
      [['session', '--url', 'stop', 'alpha'], "option '--url <url>' argument missing: it took the command 'stop' as its value", 'agentq session --help'],
      // not a coordinator URL '-h'
      [['list', '--url', '-h'], "option '--url <url>' argument missing: it took the option '-h' as its value", 'agentq list --help'],
    ] as const) {
      const r = await cli(url, [...argv]);
      assert.equal(r.code, 2, argv.join(' '));
      assert.equal(r.stderr, `agentq: ${message}\nRun '${help}' for usage.\n`, argv.join(' '));
    }
    // not a token `--json` sent to the coordinator, and its answer printed as text
    for (const argv of [
      ['status', 'job_0123456789ab', '--token', '--json'],
      ['--token', '--json', 'status', 'job_0123456789ab'],
    ]) {
      const r = await cli(url, argv);
      assert.equal(r.code, 2, argv.join(' '));
      assert.equal(
        envelope<Failure>(r, CliFailure).error.message,
        "option '--token <token>' argument missing: it took the option '--json' as its value",
        argv.join(' '),
      );
    }
  });

  it('takes the command after global options', async () => {
    const r = await cli(undefined, ['--url', await deadUrl(), '--json', 'list']);
    assert.equal(r.code, 1);
    assert.equal(envelope<Failure>(r, CliFailure).error.code, 'coordinator_unreachable');
  });

  it('treats an empty AGENTQ_URL as unset (the default URL)', async () => {
    const r = await cli(undefined, ['list', '--json'], { env: { AGENTQ_URL: '' } });
    // whether something listens on the default port or not, the URL itself is accepted
    assert.notEqual(r.code, 2, r.stdout);
    if (r.code === 1) assert.match(envelope<Failure>(r, CliFailure).error.message, /127\.0\.0\.1:8765/);
  });

  it('prefers --url over AGENTQ_URL', async () => {
    const r = await cli('http://127.0.0.1:9', ['list', '--json', '--url', await deadUrl()], {});
    assert.equal(r.code, 1);
    assert.doesNotMatch(envelope<Failure>(r, CliFailure).error.message, /:9\b/);
  });
});
