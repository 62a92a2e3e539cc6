import assert from 'node:assert/strict';
import { join } from 'node:path';
import { test } from 'node:test';
import { AgentqClient } from '@agentq/client';
import { cutResult, jsonBytes, jsonPrefixLength, placeRest, REPORT_ROOM_BYTES } from '../src/report-bounds.js';
import { fakeClaude } from './claude.js';
import { largeText } from './fixtures/large-text.js';
import { captureLog, controlServer, coordinator, coordinatorAgain, launcher, script, settled, tempDir } from './helpers.js';
import { proxy } from './proxy.js';
import { spawnLauncher } from './spawn-launcher.js';

/*
 * A result larger than a report to the coordinator may be (its body limit, 6 MiB by default) but
 * within an executor's event line (16 MiB). The completed report was refused (413) and the job
 * failed with `report_refused`, whose error did not say where the answer could be read.
 */

/** A registration answer as a coordinator older than max_output_bytes gives it. */
const withoutOutputWindow = (body: unknown): unknown => {
  const { max_output_bytes: _kept, ...older } = body as Record<string, unknown>;
  return older;
};

/**
 * How a note ends: the most of a job's output the coordinator keeps, as it said at registration
 * (`max_output_bytes`), or, from a coordinator older than that field, the setting and its default.
 */
const keeps = (kept: number | undefined): string =>
  kept === undefined
    ? String.raw`\(the coordinator keeps the newest JOB_OUTPUT_MAX_BYTES of a job's output, 1 MiB by default\)\.\]$`
    : String.raw`\(the coordinator keeps the newest ${kept} bytes of a job's output \(JOB_OUTPUT_MAX_BYTES\)\)\.\]$`;

/** The note of a result whose rest went whole to the job's output, from a coordinator that keeps `kept` bytes of it. */
const NOTE = (kept: number | undefined): RegExp =>
  new RegExp(
    String.raw`\n\n\[agentq: result cut: it is (\d+) bytes, more than a report to the coordinator may carry \((\d+) bytes in all\); above are its first (\d+) bytes\. The other (\d+) bytes are at the end of the job's output, from byte offset (\d+): GET \/jobs\/([\w-]+)\/output\?offset=\5, or ` +
      String.raw`${'`'}agentq output \6 --tail \4${'`'} ` +
      keeps(kept),
  );

/**
 * The figures of the note of a `size`-byte result whose rest went to the job's output without its
 * start (`why` it was left out: a pattern of what the note says), from a coordinator that keeps
 * `kept` bytes of a job's output; checked against one another.
 */
function partialNote(result: string, size: number, why: string, kept: number | undefined) {
  const note = new RegExp(
    String.raw`\n\n\[agentq: result cut: it is (\d+) bytes, more than a report to the coordinator may carry \((\d+) bytes in all\); above are its first (\d+) bytes\. Of the other (\d+) bytes, the last (\d+) are at the end of the job's output \(the (\d+) before them were left out: ${why}\), from byte offset (\d+): GET \/jobs\/[\w-]+\/output\?offset=\7, or ` +
      String.raw`${'`'}agentq output [\w-]+ --tail \5${'`'} ` +
      keeps(kept),
  ).exec(result);
  assert.ok(note, result.slice(-1000));
  const [total, , headBytes, restBytes, sentBytes, leftOut, offset] = note.slice(1, 8).map(Number) as [number, number, number, number, number, number, number];
  assert.equal(total, size);
  assert.equal(headBytes + restBytes, total);
  assert.equal(sentBytes + leftOut, restBytes);
  return { maxReportBytes: Number(note[2]), restBytes, sentBytes, leftOut, offset };
}

test("a result over the coordinator's report limit completes the job, cut to fit with a note that says where the rest is: at the end of the job's output", async (t) => {
  // the default body limit (6 × MAX_PROMPT_BYTES + 64 KiB), with room in the output for the rest
  // of the result (2 × 3 MiB + 64 KiB does not raise the body limit)
  const { c, client } = await coordinator(t, { outputMaxBytes: 3 * 1024 * 1024 });
  const claude = fakeClaude(t);
  const launcher = spawnLauncher(t, ['--url', c.url, '--executor', 'claude-code'], { PATH: claude.path });
  const bodyLimit = 6 * 1024 * 1024 + 64 * 1024;
  const size = 8 * 1024 * 1024;
  const job = await client.createJob({ type: 'start_session', session_name: 'large-result', prompt: `LARGE_RESULT ${size}` });
  const done = await settled(client, job.job_id);
  assert.equal(done.status, 'completed', `${done.error_code}: ${done.error}`);

  const full = largeText(size);
  const result = done.result ?? '';
  const note = NOTE(3 * 1024 * 1024).exec(result);
  assert.ok(note, result.slice(-1000));
  const [total, max, headBytes, restBytes, offset] = note.slice(1, 6).map(Number) as [number, number, number, number, number];
  assert.equal(note[6], job.job_id);
  assert.equal(total, Buffer.byteLength(full));
  assert.equal(max, bodyLimit, 'the limit is the one the coordinator told the launcher at registration');
  const head = result.slice(0, note.index);
  assert.equal(Buffer.byteLength(head), headBytes);
  assert.ok(headBytes > 5 * 1024 * 1024, `as much of the result as fits is kept (${headBytes} bytes)`);
  assert.equal(headBytes + restBytes, total);
  assert.ok(full.startsWith(head), 'the head is the start of the result, as it was');

  // the rest, from the offset the note gives: the result whole, with the head
  const rest = await client.getOutput(job.job_id, { offset: offset, limit_bytes: 16 * 1024 * 1024 });
  assert.equal(rest.truncated, false);
  assert.equal(head + rest.output, full);
  assert.equal(rest.next_offset, rest.total_bytes, 'the rest ends the output');
  // and the `--tail` the note gives reads the same
  assert.equal((await client.getOutput(job.job_id, { tail_bytes: restBytes })).output, rest.output);
  // the launcher said what it did
  const logged = await launcher.logged(/result too large for a report/);
  assert.equal(logged['job_id'], job.job_id);
  assert.equal(logged['result_bytes'], total);
});

test("a result whose rest is more than the launcher queues as a job's output (8 MiB) sends the rest's end, and says so: no 'coordinator slow' warning, no note pointing at bytes never sent", async (t) => {
  // the least body limit there is (1 MiB): a 10 MiB result leaves a rest of 9 MiB; from a
  // coordinator that does not say how much of a job's output it keeps (older than
  // max_output_bytes), the bound is the launcher's queue
  const { c, client } = await coordinator(t, { maxPromptBytes: 64 * 1024, outputMaxBytes: 256 * 1024 });
  const px = await proxy(t, c.url, () => false, (req) => (req.url === '/launcher/register' ? withoutOutputWindow : undefined));
  const { log, lines, waitFor } = captureLog();
  await launcher(t, px.url, {}, { log });
  const size = 10 * 1024 * 1024;
  const queueMax = 8 * 1024 * 1024;
  const job = await client.createJob({ type: 'start_session', session_name: 'huge-rest', prompt: script([{ bigResult: size }]) });
  const done = await settled(client, job.job_id);
  assert.equal(done.status, 'completed', `${done.error_code}: ${done.error}`);

  const { restBytes, sentBytes, leftOut, offset } = partialNote(done.result ?? '', size, "more than the launcher queues as a job's output, 8388608 bytes", undefined);
  assert.ok(sentBytes < queueMax && sentBytes > queueMax - 64 * 1024, `as much as the queue holds is sent (${sentBytes} bytes)`);
  // the output ends with what was sent, from the offset the note gives
  const output = await client.getOutput(job.job_id, { tail_bytes: 1024 });
  assert.equal(output.total_bytes, offset + sentBytes);
  assert.equal(output.output, 'r'.repeat(1024));

  // the launcher said what it did, and did not blame the coordinator for it
  const logged = await waitFor((l) => /result too large for a report/.test(String(l['msg'])));
  assert.deepEqual([logged['rest_bytes'], logged['rest_left_out_bytes'], logged['max_queued_output_bytes']], [restBytes, leftOut, queueMax]);
  assert.match(String(logged['msg']), /but for its start, which is more than the launcher queues as a job's output/);
  const slow = lines.filter((l) => /coordinator has taken|dropped during the outage/.test(String(l['msg'])));
  assert.deepEqual(slow, [], 'no output dropped as if the coordinator were slow');
});

test("a result whose rest is more than the coordinator keeps of a job's output (JOB_OUTPUT_MAX_BYTES) sends only the rest's end it keeps, and says so: the note's offset is there to read", async (t) => {
  // a body limit of 1 MiB: a 2 MiB result leaves a rest of 1 MiB, and the coordinator keeps 256 KiB of output
  const kept = 256 * 1024;
  const { c, client } = await coordinator(t, { maxPromptBytes: 64 * 1024, outputMaxBytes: kept });
  const { log, waitFor } = captureLog();
  await launcher(t, c.url, {}, { log });
  const size = 2 * 1024 * 1024;
  const job = await client.createJob({ type: 'start_session', session_name: 'kept-rest', prompt: script([{ say: 'working' }, { bigResult: size }]) });
  const done = await settled(client, job.job_id);
  assert.equal(done.status, 'completed', `${done.error_code}: ${done.error}`);

  const { restBytes, sentBytes, leftOut, offset } = partialNote(done.result ?? '', size, String.raw`more than the coordinator keeps of a job's output, 262144 bytes \(JOB_OUTPUT_MAX_BYTES\)`, kept);
  assert.ok(sentBytes < kept && sentBytes > kept - 1024, `as much as the coordinator keeps is sent (${sentBytes} bytes)`);
  // the note's offset is still held: from it, the rest's end, to the end of the output
  const rest = await client.getOutput(job.job_id, { offset, limit_bytes: 16 * 1024 * 1024 });
  assert.equal(rest.offset, offset, 'the coordinator holds the output from the offset the note gives');
  assert.equal(rest.output, 'r'.repeat(sentBytes));
  assert.equal(rest.next_offset, rest.total_bytes);
  const whole = (await client.getOutput(job.job_id, { offset: 0 })).output;
  assert.match(whole.slice(0, whole.indexOf('\nr') + 2), /\n\[agentq: the end of the job's result \(its last \d+ of \d+ bytes; the \d+ bytes before them are left out, more than the coordinator keeps of a job's output, 262144 bytes \(JOB_OUTPUT_MAX_BYTES\)\), cut from the result to fit in a report to the coordinator:\]\nr/);

  const logged = await waitFor((l) => /result too large for a report/.test(String(l['msg'])));
  assert.deepEqual([logged['rest_bytes'], logged['rest_left_out_bytes'], logged['max_output_bytes'], logged['output_offset']], [restBytes, leftOut, kept, offset]);
  assert.match(String(logged['msg']), /but for its start, which is more than the coordinator keeps of a job's output$/);
});

test("a launcher that registers again (the coordinator restarted with smaller limits, and forgot it) cuts a result by the new registration's limits, not its first one's", async (t) => {
  // first a body limit of 1.5 MiB + 64 KiB (6 × 256 KiB + 64 KiB) and 256 KiB of a job's output kept
  const { c } = await coordinator(t, { maxPromptBytes: 256 * 1024, outputMaxBytes: 256 * 1024 });
  const { log, waitFor } = captureLog();
  const { id } = await launcher(t, c.url, {}, { log });
  const first = await waitFor((l) => l['msg'] === 'registered');
  assert.equal(first['launcher_id'], id);
  // the coordinator comes back on its port with less of both, and without the launcher (its
  // memory store): 1 MiB of body and 128 KiB of output
  await c.close();
  const kept = 128 * 1024;
  const fresh = await coordinatorAgain(t, c.port, { maxPromptBytes: 64 * 1024, outputMaxBytes: kept });
  const client = new AgentqClient({ url: fresh.url });
  t.after(() => client.close());
  await waitFor((l) => l['msg'] === 'registered again under a new id');
  // a result between the two body limits: by the first registration's, it would go whole in a
  // report the coordinator now refuses (413)
  const size = 1280 * 1024;
  const job = await client.createJob({ type: 'start_session', session_name: 'new-limits', prompt: script([{ bigResult: size }]) });
  const done = await settled(client, job.job_id);
  assert.equal(done.status, 'completed', `${done.error_code}: ${done.error}`);
  assert.notEqual(done.launcher_id, id);

  const why = String.raw`more than the coordinator keeps of a job's output, 131072 bytes \(JOB_OUTPUT_MAX_BYTES\)`;
  const { maxReportBytes, sentBytes, offset } = partialNote(done.result ?? '', size, why, kept);
  assert.equal(maxReportBytes, 1024 * 1024, "the body limit of the coordinator's latest answer");
  assert.ok(sentBytes < kept && sentBytes > kept - 1024, `as much as the coordinator keeps now is sent (${sentBytes} bytes)`);
  const rest = await client.getOutput(job.job_id, { offset, limit_bytes: 16 * 1024 * 1024 });
  assert.equal(rest.offset, offset, 'the coordinator holds the output from the offset the note gives');
  assert.equal(rest.output, 'r'.repeat(sentBytes));
});

test("a coordinator restarted on its SQLite file with smaller limits, which still knows the launcher, tells them at the next heartbeat: the next result is cut by them", async (t) => {
  const databaseUrl = `sqlite:${join(tempDir(t), 'agentq.db')}`;
  const { c } = await coordinator(t, { databaseUrl, maxPromptBytes: 256 * 1024, outputMaxBytes: 256 * 1024 });
  const px = await proxy(t, c.url);
  const { log, lines, waitFor } = captureLog();
  const { id } = await launcher(t, px.url, {}, { log });
  await c.close();
  const kept = 128 * 1024;
  const fresh = await coordinatorAgain(t, c.port, { databaseUrl, maxPromptBytes: 64 * 1024, outputMaxBytes: kept });
  const client = new AgentqClient({ url: fresh.url });
  t.after(() => client.close());
  // the first heartbeat the restarted coordinator answers tells the launcher its new limits
  const told = await waitFor((l) => /the coordinator's limits changed/.test(String(l['msg'])));
  assert.deepEqual([told['max_report_bytes'], told['max_output_bytes']], [1024 * 1024, kept]);
  // a result between the two body limits: by the registration's, it would go whole in a report
  // the coordinator now refuses (413)
  const size = 1280 * 1024;
  const job = await client.createJob({ type: 'start_session', session_name: 'restarted-limits', prompt: script([{ bigResult: size }]) });
  const done = await settled(client, job.job_id);
  assert.equal(done.status, 'completed', `${done.error_code}: ${done.error}`);
  assert.equal(done.launcher_id, id, 'the launcher did not register again');
  assert.ok(!lines.some((l) => l['msg'] === 'registered again under a new id'));

  const why = String.raw`more than the coordinator keeps of a job's output, 131072 bytes \(JOB_OUTPUT_MAX_BYTES\)`;
  const { maxReportBytes, sentBytes } = partialNote(done.result ?? '', size, why, kept);
  assert.equal(maxReportBytes, 1024 * 1024);
  assert.ok(sentBytes < kept && sentBytes > kept - 1024, `as much as the coordinator keeps now is sent (${sentBytes} bytes)`);
});

test("a cut result's rest goes whole to the output when the job's output already waiting fills the queue (coordinator away): the oldest output makes room, never 'the last 0'", async (t) => {
  // a body limit of 1 MiB + 64 KiB (2 × JOB_OUTPUT_MAX_BYTES + 64 KiB), and room in the output for the rest
  const { c, client } = await coordinator(t, { maxPromptBytes: 64 * 1024, outputMaxBytes: 512 * 1024 });
  let away = false;
  const px = await proxy(t, c.url, () => away);
  const control = await controlServer(t);
  const { log, lines, waitFor } = captureLog();
  await launcher(t, px.url, {}, { log });
  const size = 1280 * 1024;
  const printed = 9 * 1024 * 1024;
  const job = await client.createJob({
    type: 'start_session',
    session_name: 'full-queue',
    prompt: script([{ hello: true }, { await: true }, { sayBytes: printed }, { bigResult: size }], control),
  });
  const hello = await control.next();
  // the coordinator is away while the executor prints more than the launcher queues (8 MiB) and
  // then gives its result
  away = true;
  hello.release();
  await waitFor((l) => /result too large for a report/.test(String(l['msg'])));
  away = false;
  const done = await settled(client, job.job_id);
  assert.equal(done.status, 'completed', `${done.error_code}: ${done.error}`);

  const result = done.result ?? '';
  const note = NOTE(512 * 1024).exec(result);
  assert.ok(note, result.slice(-1000));
  const [total, , headBytes, restBytes, offset] = note.slice(1, 6).map(Number) as [number, number, number, number, number];
  assert.equal(total, size);
  assert.equal(headBytes + restBytes, total);
  assert.ok(restBytes > 200 * 1024, `a rest to lose (${restBytes} bytes)`);
  // the rest, from the offset the note gives, after all that output: the result whole, with the head
  const rest = await client.getOutput(job.job_id, { offset, limit_bytes: 16 * 1024 * 1024 });
  assert.equal(rest.offset, offset, 'the coordinator holds the rest from its first byte');
  assert.equal(result.slice(0, note.index) + rest.output, 'r'.repeat(size));
  assert.equal(offset, printed + Buffer.byteLength(`\n[agentq: the rest of the job's result (its last ${restBytes} of ${total} bytes), cut from the result to fit in a report to the coordinator:]\n`));
  // what made room was the oldest of the output still waiting, as for any output past the queue's
  // bound, and the launcher said so
  const dropped = lines.filter((l) => /dropping the oldest output of the job/.test(String(l['msg'])));
  assert.equal(dropped.length, 1);
  const logged = lines.find((l) => /result too large for a report/.test(String(l['msg'])))!;
  assert.deepEqual([logged['result_bytes'], logged['output_offset'], logged['rest_left_out_bytes']], [total, offset, undefined]);
});

test('a result is cut where its JSON in a report reaches the limit, never inside an escape or a character', () => {
  const text = 'a"b\\c\td\u0001e\u00e9f\u20acg\u{1F600}h\ud800i\udc00j\n';
  // what the cut counts is what JSON.stringify makes of the text (the client sends that)
  assert.equal(jsonBytes(text), Buffer.byteLength(JSON.stringify(text)) - 2);
  for (let max = 0; max <= jsonBytes(text); max++) {
    const head = text.slice(0, jsonPrefixLength(text, max));
    const bytes = Buffer.byteLength(JSON.stringify(head)) - 2;
    assert.ok(bytes <= max, `${bytes} > ${max}`);
    // the longest such start: one more character would pass the limit
    const next = text.slice(0, jsonPrefixLength(text, max) + (/[\ud800-\udbff][\udc00-\udfff]/.test(text.slice(head.length, head.length + 2)) ? 2 : 1));
    if (next.length > head.length && next.length <= text.length) assert.ok(Buffer.byteLength(JSON.stringify(next)) - 2 > max);
    assert.ok(!/[\ud800-\udbff]$/.test(head) || head.endsWith('\ud800'), 'no surrogate pair split');
  }
  const cut = cutResult('x'.repeat(REPORT_ROOM_BYTES + 100), REPORT_ROOM_BYTES + 50, 0);
  assert.deepEqual(cut && [cut.head.length, cut.rest.length, cut.totalBytes], [50, REPORT_ROOM_BYTES + 50, REPORT_ROOM_BYTES + 100]);
  assert.equal(cutResult('x'.repeat(50), REPORT_ROOM_BYTES + 50, 0), undefined);
});

test('a result exactly as large as a report has room for is sent whole; one byte more and it is cut, the sizes in UTF-8', () => {
  const max = REPORT_ROOM_BYTES + 1000;
  const other = 10; // the report's other fields: 990 bytes are left for the result
  assert.equal(cutResult('é'.repeat(495), max, other), undefined, 'just under: 990 bytes of JSON');
  const over = cutResult(`${'é'.repeat(495)}a`, max, other);
  assert.deepEqual(over && [over.head, over.rest, over.headBytes, over.restBytes, over.totalBytes], ['é'.repeat(495), 'a', 990, 1, 991]);
  // a two-byte character across the limit goes whole to the rest
  const split = cutResult(`${'a'.repeat(989)}é`, max, other);
  assert.deepEqual(split && [split.head.length, split.rest, split.headBytes, split.restBytes], [989, 'é', 989, 2]);
  // escapes count as JSON sends them, the sizes the note gives as the text's UTF-8 bytes
  const escaped = cutResult(`${'a'.repeat(989)}"`, max, other);
  assert.deepEqual(escaped && [escaped.head.length, escaped.rest, escaped.totalBytes], [989, '"', 990]);
  assert.equal(cutResult(`${'a'.repeat(988)}"`, max, other), undefined);
});

test("a cut result's rest, placed in the job's output queue: whole where it fits, its end where it does not, and a note that never points at nothing", () => {
  const cut = cutResult(`${'h'.repeat(REPORT_ROOM_BYTES)}${'é'.repeat(500)}`, REPORT_ROOM_BYTES + 16, 0)!;
  assert.deepEqual([cut.headBytes, cut.restBytes], [16, REPORT_ROOM_BYTES - 16 + 1000]);
  const room = { jobId: 'job_1', maxReportBytes: REPORT_ROOM_BYTES + 16, queueMaxBytes: 100_000, outputEnd: 500 };

  // room for it all: the rest whole after its line, the note's offset just past that line
  const whole = placeRest(cut, { ...room, queueRoomBytes: 100_000 });
  const line = `\n[agentq: the rest of the job's result (its last ${cut.restBytes} of ${cut.totalBytes} bytes), cut from the result to fit in a report to the coordinator:]\n`;
  assert.equal(whole.output, line + cut.rest);
  assert.deepEqual([whole.sentBytes, whole.leftOutBytes], [cut.restBytes, 0]);
  const offset = 500 + Buffer.byteLength(line);
  assert.equal(
    whole.result,
    `${cut.head}\n\n[agentq: result cut: it is ${cut.totalBytes} bytes, more than a report to the coordinator may carry (${REPORT_ROOM_BYTES + 16} bytes in all); above are its first 16 bytes. ` +
      `The other ${cut.restBytes} bytes are at the end of the job's output, from byte offset ${offset}: GET /jobs/job_1/output?offset=${offset}, or \`agentq output job_1 --tail ${cut.restBytes}\` ` +
      "(the coordinator keeps the newest JOB_OUTPUT_MAX_BYTES of a job's output, 1 MiB by default).]",
  );
  assert.deepEqual(whole.log.fields, { result_bytes: cut.totalBytes, kept_bytes: 16, max_report_bytes: REPORT_ROOM_BYTES + 16, output_offset: offset });
  assert.equal(whole.log.msg, "result too large for a report to the coordinator: cut to fit; the rest goes to the job's output");
  // a coordinator that says how much of a job's output it keeps: the note gives that figure, not the default's
  const told = placeRest(cut, { ...room, queueRoomBytes: 100_000, keptBytes: 50_000 });
  assert.equal(told.output, whole.output);
  assert.equal(told.result, whole.result.replace(/\(the coordinator keeps .*\)\.\]$/, "(the coordinator keeps the newest 50000 bytes of a job's output (JOB_OUTPUT_MAX_BYTES)).]"));
  assert.notEqual(told.result, whole.result);

  // room for 1000 bytes: the rest's end (whole characters), line included, within them
  const end = placeRest(cut, { ...room, queueRoomBytes: 1000 });
  assert.ok(Buffer.byteLength(end.output) <= 1000, `${Buffer.byteLength(end.output)} bytes queued`);
  assert.ok(end.sentBytes > 500 && end.sentBytes % 2 === 0, `${end.sentBytes} bytes of é sent`);
  assert.equal(end.sentBytes + end.leftOutBytes, cut.restBytes);
  assert.ok(end.output.endsWith(`, cut from the result to fit in a report to the coordinator:]\n${'é'.repeat(end.sentBytes / 2)}`));
  assert.match(end.output, new RegExp(`^\\n\\[agentq: the end of the job's result \\(its last ${end.sentBytes} of ${cut.totalBytes} bytes; the ${end.leftOutBytes} bytes before them are left out, more than the launcher queues as a job's output, 100000 bytes\\)`));
  assert.match(end.result, new RegExp(`Of the other ${cut.restBytes} bytes, the last ${end.sentBytes} are at the end of the job's output \\(the ${end.leftOutBytes} before them were left out: more than the launcher queues as a job's output, 100000 bytes\\), from byte offset \\d+: .* --tail ${end.sentBytes}\``));
  assert.deepEqual([end.log.fields['rest_bytes'], end.log.fields['rest_left_out_bytes'], end.log.fields['max_queued_output_bytes']], [cut.restBytes, end.leftOutBytes, 100_000]);

  // a coordinator that keeps 1000 bytes of a job's output: no more is sent, and that is why
  const kept = placeRest(cut, { ...room, queueRoomBytes: 100_000, keptBytes: 1000 });
  assert.ok(Buffer.byteLength(kept.output) <= 1000 && kept.sentBytes > 500, `${kept.sentBytes} bytes of the rest in ${Buffer.byteLength(kept.output)}`);
  assert.match(kept.output, /the \d+ bytes before them are left out, more than the coordinator keeps of a job's output, 1000 bytes \(JOB_OUTPUT_MAX_BYTES\)\)/);
  assert.match(kept.result, /\(the \d+ before them were left out: more than the coordinator keeps of a job's output, 1000 bytes \(JOB_OUTPUT_MAX_BYTES\)\)/);
  assert.ok(kept.result.endsWith("(the coordinator keeps the newest 1000 bytes of a job's output (JOB_OUTPUT_MAX_BYTES)).]"), kept.result.slice(-300));
  assert.deepEqual([kept.log.fields['max_output_bytes'], kept.log.fields['max_queued_output_bytes']], [1000, undefined]);
  assert.match(kept.log.msg, /but for its start, which is more than the coordinator keeps of a job's output$/);
  // one that keeps more than the queue has room for: the queue is the bound
  assert.equal(placeRest(cut, { ...room, queueRoomBytes: 1000, keptBytes: 5000 }).output, end.output);

  // no room even for the line: nothing queued, and the note says the rest could not be sent
  const none = placeRest(cut, { ...room, queueRoomBytes: 100 });
  assert.deepEqual([none.output, none.sentBytes, none.leftOutBytes], ['', 0, cut.restBytes]);
  assert.ok(
    none.result.endsWith(`above are its first 16 bytes. The other ${cut.restBytes} bytes could not be sent: the launcher's queue of the job's output (100000 bytes) had no room for them.]`),
    none.result.slice(-300),
  );
  assert.doesNotMatch(none.result, /last 0|offset/);
  assert.match(none.log.msg, /the rest could not be sent as the job's output and is lost/);
});
