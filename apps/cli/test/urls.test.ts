import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { CliCommandData, CliEnvelope, type Health } from '@agentq/protocol';
import { cli, coordinator, deadUrl, envelope } from './helpers.js';

describe('--url with several coordinators (a comma list)', () => {
  it('skips one that cannot be reached', async (t) => {
    const c = await coordinator(t);
    const r = await cli(undefined, ['--url', `${await deadUrl()},${c.url}`, 'health', '--json']);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(envelope<{ ok: true; data: Health }>(r, CliEnvelope(CliCommandData.health)).data.status, 'ok');
  });

  it('refuses a list with an item that is not http(s)', async () => {
    const r = await cli(undefined, ['--url', 'http://127.0.0.1:1,ftp://x', 'list']);
    assert.equal(r.code, 2);
    assert.match(r.stderr, /must be http/);
  });
});
