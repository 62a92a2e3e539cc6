import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { test } from 'node:test';
import { ManualClock } from '../src/core/clock.js';
import { REGISTRATION_CREDENTIALS_KEPT } from '../src/core/launchers.js';
import { MemoryLauncherCredentials } from '../src/http/auth/launcher-credentials.js';
import { startAuthTest } from './auth-helpers.js';
import { nextEvent, rejectsWith, start, startTest } from './helpers.js';
import { tempDatabase } from './process.js';

/*
 * `registration_key`: a launcher whose registration answer was lost (a timeout, a reset
 * connection, a 503 of a proxy) sends the registration again with the same key, and is answered
 * with the launcher its first try registered instead of a second one (which would never poll, be
 * listed online until the heartbeat timeout, and count for routing). These run on every store
 * (AGENTQ_TEST_STORE); pg-races.test.ts has the two tries on two coordinators at once.
 */

const newKey = () => randomBytes(18).toString('base64url');
const host = { hostname: 'box', executor_type: 'test', host_id: 'h_box-registering', labels: { zone: 'eu', gpu: 'a100' } };
const timing = { heartbeatIntervalSeconds: 10, heartbeatTimeoutSeconds: 30, sweepIntervalMs: 600_000 };

test('a registration sent again with its registration_key is answered with the same launcher, which is listed once and works', async (t) => {
  const { client } = await startTest(t);
  const registration_key = newKey();
  const first = await client.register({ ...host, registration_key });
  const again = await client.register({ ...host, labels: { gpu: 'a100', zone: 'eu' }, registration_key });
  assert.deepEqual(again, first, 'the same answer (labels in another order are the same labels)');

  const { launchers } = await client.listLaunchers();
  assert.deepEqual(
    launchers.map((l) => [l.launcher_id, l.status]),
    [[first.launcher_id, 'online']],
  );
  assert.equal((await client.health()).launchers.online, 1);

  const job = await start(client, 'after-a-lost-answer');
  const taken = await client.poll(first.launcher_id, { holdSeconds: first.poll_timeout_seconds });
  assert.equal(taken?.job?.job_id, job.job_id);
  await client.reportStarted(job.job_id, { launcher_id: first.launcher_id });
  await client.reportCompleted(job.job_id, { launcher_id: first.launcher_id, status: 'success' });
  assert.equal((await client.getJob(job.job_id)).status, 'completed');

  // without a key (as before it existed), and with another key: a registration is a new launcher
  const bare = await client.register(host);
  const other = await client.register({ ...host, registration_key: newKey() });
  assert.equal(new Set([first.launcher_id, bare.launcher_id, other.launcher_id]).size, 3);
  assert.equal((await client.listLaunchers()).launchers.length, 3);
});

test('a retry answers `replaced` as a registration sent again without a key does: its predecessors were replaced by the first try', async (t) => {
  const { client } = await startTest(t);
  const old = await client.register(host);
  const registration_key = newKey();
  const first = await client.register({ ...host, replaces: [old.launcher_id], registration_key });
  assert.deepEqual(first.replaced, [old.launcher_id]);
  const again = await client.register({ ...host, replaces: [old.launcher_id], registration_key });
  assert.equal(again.launcher_id, first.launcher_id);
  assert.deepEqual(again.replaced, []);
  assert.deepEqual((await client.listLaunchers()).launchers.map((l) => l.launcher_id), [first.launcher_id]);
});

test('the registration_key of an online launcher sent with other fields is 409 registration_key_reused, naming that launcher', async (t) => {
  const { client } = await startTest(t);
  const registration_key = newKey();
  const first = await client.register({ ...host, registration_key });
  const details = await rejectsWith(client.register({ ...host, max_jobs: 3, registration_key }), 409, 'registration_key_reused');
  assert.deepEqual(details, { registration_key, launcher_id: first.launcher_id });
  await rejectsWith(client.register({ ...host, hostname: 'box-2', registration_key }), 409, 'registration_key_reused');
  assert.equal((await client.listLaunchers()).launchers.length, 1);
});

test('the key of a launcher that went stale or deregistered registers a new launcher; the key then names the new one', async (t) => {
  const clock = new ManualClock();
  const { client, c } = await startTest(t, timing, { clock });
  const registration_key = newKey();
  const lost = await client.register({ ...host, registration_key });
  clock.advance(31_000);
  await c.core.sweep();
  assert.equal((await client.listLaunchers()).launchers[0]?.status, 'stale');

  // a stale launcher must register again (its polls are 401): the same key is a new registration
  const next = await client.register({ ...host, registration_key });
  assert.notEqual(next.launcher_id, lost.launcher_id);
  await rejectsWith(client.heartbeat({ launcher_id: lost.launcher_id }), 401, 'launcher_unknown');
  assert.equal((await client.register({ ...host, registration_key })).launcher_id, next.launcher_id, 'its retry: the new launcher');
  const listed = (await client.listLaunchers()).launchers.map((l) => [l.launcher_id, l.status]);
  assert.deepEqual(listed.sort(), [[lost.launcher_id, 'stale'], [next.launcher_id, 'online']].sort());

  // being deregistered (told on its next poll): over too
  assert.equal((await client.deleteLauncher(next.launcher_id)).outcome, 'deregistering');
  const third = await client.register({ ...host, registration_key });
  assert.ok(![lost.launcher_id, next.launcher_id].includes(third.launcher_id));
  // deregistered itself, gone: the key registers anew
  await client.deleteLauncher(third.launcher_id, { self: true });
  const fourth = await client.register({ ...host, registration_key });
  assert.ok(![lost.launcher_id, next.launcher_id, third.launcher_id].includes(fourth.launcher_id));
  assert.equal((await client.register({ ...host, registration_key })).launcher_id, fourth.launcher_id);
});

test('registration_key is checked by the schema: 400 validation_failed naming the field', async (t) => {
  const { client } = await startTest(t);
  for (const registration_key of ['short', 'has spaces in it, sixteen+', 'x'.repeat(129), '']) {
    const details = await rejectsWith(client.register({ ...host, registration_key }), 400, 'validation_failed');
    assert.match(String(details.field), /registration_key/, JSON.stringify(details));
  }
  const bad = await rejectsWith(client.register({ ...host, registration_key: 42 } as never), 400, 'validation_failed');
  assert.match(String(bad.field), /registration_key/);
  assert.deepEqual((await client.listLaunchers()).launchers, []);
  // 16 to 128 letters, digits, `-` and `_` (what base64url of random bytes is made of)
  await client.register({ ...host, registration_key: 'a-b_C'.repeat(3) + '9' });
  await client.register({ ...host, registration_key: 'k'.repeat(128) });
  assert.equal((await client.listLaunchers()).launchers.length, 2);
});

test('a retry after the coordinator restarted on SQLite is answered with the launcher its first try registered', async (t) => {
  const databaseUrl = tempDatabase(t);
  const registration_key = newKey();
  const before = await startTest(t, { databaseUrl });
  const first = await before.client.register({ ...host, registration_key });
  await before.c.close();

  const { client } = await startTest(t, { databaseUrl });
  const again = await client.register({ ...host, registration_key });
  assert.equal(again.launcher_id, first.launcher_id);
  assert.deepEqual((await client.listLaunchers()).launchers.map((l) => l.launcher_id), [first.launcher_id]);
});

test('registration keys are per token: the same key of another launcher token is another registration; a retry gets a new credential', async (t) => {
  const a = await startAuthTest(t);
  const registration_key = newKey();
  const first = await a.as.launcher.register({ hostname: 'box', executor_type: 'test', registration_key });
  const again = await a.as.launcher.register({ hostname: 'box', executor_type: 'test', registration_key });
  assert.equal(again.launcher_id, first.launcher_id);
  assert.ok(again.launcher_token && again.launcher_token !== first.launcher_token);
  // the credential of the answer the launcher received works (and so does the other answer's:
  // the coordinator cannot know which one arrived)
  await a.withToken(again.launcher_token).heartbeat({ launcher_id: first.launcher_id });
  await a.withToken(first.launcher_token).heartbeat({ launcher_id: first.launcher_id });

  // an admin token registering with that key: its own registration, not the launcher token's launcher
  const admin = await a.as.admin.register({ hostname: 'box', executor_type: 'test', registration_key });
  assert.notEqual(admin.launcher_id, first.launcher_id);
  assert.equal((await a.as.reader.listLaunchers()).launchers.length, 2);
});

test('the credential of the answer to a retry stays in force though the first try, whose answer was lost, finishes after it', async (t) => {
  const a = await startAuthTest(t);
  const core = a.c.core;
  // the first try's request is slow past its registration (a store under load): anything it
  // still writes about its credential comes after its retry was answered
  const setHash = core.setLauncherTokenHash.bind(core);
  let release!: () => void;
  const held = new Promise<void>((resolve) => (release = resolve));
  let calls = 0;
  core.setLauncherTokenHash = async (id, hash) => {
    if (calls++ === 0) await held;
    return setHash(id, hash);
  };
  t.after(() => {
    release();
    core.setLauncherTokenHash = setHash;
  });
  const body = { hostname: 'box', executor_type: 'test', registration_key: newKey() };
  const registered = nextEvent(core, 'launcher.registered');
  const lost = a.as.launcher.register(body);
  await registered;
  const again = await a.as.launcher.register(body);
  release();
  const first = await lost;
  assert.equal(again.launcher_id, first.launcher_id);

  // the launcher holds the retry's answer: its credential works
  await a.withToken(again.launcher_token).heartbeat({ launcher_id: again.launcher_id });
});

for (const [where, credentials] of [
  ['in the store', undefined],
  ['in memory (MemoryLauncherCredentials)', () => new MemoryLauncherCredentials()],
] as const) {
  test(`a copy of a registration that arrives late (after its retry was answered) leaves the credential the launcher holds in force: credentials ${where}`, async (t) => {
    // the first try held up on its way (a proxy that retries upstream on its own, a coordinator
    // waiting for a database connection): its retry is answered first, and the launcher goes on with
    // that answer; the first try then runs, is answered with the same launcher, and its answer is
    // lost. The coordinator cannot tell which of its answers arrived: each one's credential must work
    const a = await startAuthTest(t, {}, credentials ? { credentials: credentials() } : {});
    const body = { hostname: 'box', executor_type: 'test', registration_key: newKey() };
    const received = await a.as.launcher.register(body);
    const late = await a.as.launcher.register(body);
    assert.equal(late.launcher_id, received.launcher_id);
    await a.withToken(received.launcher_token).heartbeat({ launcher_id: received.launcher_id });
    await a.withToken(late.launcher_token).heartbeat({ launcher_id: late.launcher_id });
    // another launcher's credential (of the same registration token) is still no credential for this one
    const other = await a.as.launcher.register({ ...body, registration_key: newKey() });
    await rejectsWith(a.withToken(other.launcher_token).heartbeat({ launcher_id: received.launcher_id }), 403, 'forbidden');
    // and a credential of neither answer is none
    const forged = `${received.launcher_id}.${newKey()}${newKey()}`;
    await rejectsWith(a.withToken(forged).heartbeat({ launcher_id: received.launcher_id }), 401, 'launcher_unknown');
  });
}

test('the credentials of the answers to one registration stay in force up to a few, the newest', async (t) => {
  const a = await startAuthTest(t);
  const body = { hostname: 'box', executor_type: 'test', registration_key: newKey() };
  const answers: Array<{ launcher_id: string; launcher_token?: string | undefined }> = [];
  for (let i = 0; i < REGISTRATION_CREDENTIALS_KEPT + 2; i++) answers.push(await a.as.launcher.register(body));
  assert.equal(new Set(answers.map((x) => x.launcher_id)).size, 1);
  const works = async (token: string | undefined) =>
    a.withToken(token).heartbeat({ launcher_id: answers[0]!.launcher_id }).then(() => true, () => false);
  const kept = await Promise.all(answers.map((x) => works(x.launcher_token)));
  assert.deepEqual(kept, answers.map((_, i) => i >= 2));
});
