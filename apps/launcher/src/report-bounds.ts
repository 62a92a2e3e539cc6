import { CompletedReport, FailedReport, OutputReport, StartedReport, StoppedReport } from '@agentq/protocol';
import type { TObject } from '@sinclair/typebox';
import { Value } from '@sinclair/typebox/value';
import { outputKept } from './output-kept.js';
import type { Report } from './reporter.js';

const SCHEMAS: Record<Report['kind'], TObject> = {
  started: StartedReport,
  output: OutputReport,
  completed: CompletedReport,
  failed: FailedReport,
  stopped: StoppedReport,
};

/**
 * Text as every store can keep it: PostgreSQL refuses the NUL character (400), so it becomes
 * U+FFFD. Output goes through this before its byte offsets are counted.
 */
export const storable = (text: string): string => (text.includes('\u0000') ? text.replaceAll('\u0000', '\uFFFD') : text);

/**
 * The most UTF-8 bytes of `error` a `failed` or `stopped` report carries. An executor's `error`
 * event may be 16 MiB (MAX_EVENT_LINE_BYTES), larger than the coordinator takes in a body (1 MiB at
 * least): a report it refuses for its size would end the job `report_refused`, and the error would
 * be lost. 64 KiB is far more than any error needs to say why, and leaves room for everything
 * else a report carries.
 */
export const MAX_ERROR_BYTES = 64 * 1024;

/**
 * `text` cut to at most MAX_ERROR_BYTES UTF-8 bytes, at a character boundary, with a note of what
 * was left out. The only error that can be this long is an executor's `error` message, which the
 * launcher logs whole (`executor reported an error`, at warn level). `tail` (what the launcher adds
 * after that message: ` (exit code 1)`) is kept whole after the note: the cut takes its room from
 * the message, not from what the launcher says of how the executor ended.
 */
export function boundError(text: string, tail = ''): { text: string; cutBytes: number } {
  const bytes = Buffer.from(text, 'utf8');
  const tailBytes = Buffer.byteLength(tail);
  const total = bytes.length + tailBytes;
  if (total <= MAX_ERROR_BYTES) return { text: text + tail, cutBytes: 0 };
  const note = (cut: number) =>
    `\n… [${cut} of the error's ${total} bytes left out: a report carries at most ${MAX_ERROR_BYTES}; ` +
    `the launcher's log has it whole ("executor reported an error")]`;
  // room for the longest note (its count has at most as many digits as the total)
  let end = Math.max(0, MAX_ERROR_BYTES - Buffer.byteLength(note(total)) - tailBytes);
  // not inside a character: back to the first byte of the one the cut falls in (10xxxxxx continues one)
  while (end > 0 && (bytes[end]! & 0xc0) === 0x80) end--;
  const cutBytes = bytes.length - end;
  return { text: bytes.subarray(0, end).toString('utf8') + note(cutBytes) + tail, cutBytes };
}

/** What a `failed` report says when the executor's own error message cannot be sent. */
export const NO_ERROR_MESSAGE = 'the executor reported an error without a message';

/**
 * The report as the coordinator's schema takes it. Executors are looser than the report schemas
 * (a session id of any length, turn counts past 1e9, an empty error message), and a report the
 * coordinator refuses is not sent again: the job would stay `running` for good. So each field is
 * checked against the report's schema, and one that does not fit is left out (an optional field)
 * or replaced (`error` of a `failed` report), an object keeps only the members its schema names
 * (`usage`); NUL characters become U+FFFD (`storable`), and an
 * `error` longer than MAX_ERROR_BYTES is cut (`boundError`). Returns the fields left out and the
 * bytes of the error cut, for the log.
 */
export function conform(report: Report): { report: Report; dropped: string[]; errorBytesCut: number } {
  const schema = SCHEMAS[report.kind];
  const body: Record<string, unknown> = {};
  const dropped: string[] = [];
  let changed = false;
  let errorBytesCut = 0;
  for (const [field, sent] of Object.entries(report.body)) {
    if (sent === undefined) continue; // not sent anyway
    let value = typeof sent === 'string' ? storable(sent) : sent;
    if (field === 'error' && typeof value === 'string') {
      const bounded = boundError(value);
      value = bounded.text;
      errorBytesCut = bounded.cutBytes;
    }
    const property = schema.properties[field];
    // an object (usage) keeps only the members its schema names: the schema lets others through,
    // but the coordinator refuses a body holding an object of more than 64 members (400)
    if (property !== undefined && typeof value === 'object' && value !== null && !Array.isArray(value)) {
      const clean = Value.Clean(property, structuredClone(value)) as typeof value;
      if (Object.keys(clean).length !== Object.keys(value).length) value = clean;
    }
    changed ||= value !== sent;
    if (property !== undefined && Value.Check(property, value)) body[field] = value;
    else dropped.push(field);
  }
  if (report.kind === 'failed' && body['error'] === undefined) body['error'] = NO_ERROR_MESSAGE;
  return { report: dropped.length === 0 && !changed ? report : ({ kind: report.kind, body } as Report), dropped, errorBytesCut };
}

/**
 * Room in a request body for everything of a `completed` report but its result: the sync request
 * around it (`launcher_id`, `capacity`, the report's `job_id` and `kind`), the note a cut result
 * ends with, and the other fields (session id, usage, cost: well under 2 KiB).
 */
export const REPORT_ROOM_BYTES = 16 * 1024;

/**
 * The bytes `text` takes as a JSON string in a body, quotes left out: JSON.stringify's escapes
 * (`\n`, `\"`, `\u0001`, a lone surrogate as `\udXXX`), UTF-8 for the rest.
 */
function jsonCost(text: string, i: number): { bytes: number; units: number } {
  const c = text.charCodeAt(i);
  if (c < 0x20) return { bytes: c === 8 || c === 9 || c === 10 || c === 12 || c === 13 ? 2 : 6, units: 1 };
  if (c === 0x22 || c === 0x5c) return { bytes: 2, units: 1 };
  if (c < 0x80) return { bytes: 1, units: 1 };
  if (c < 0x800) return { bytes: 2, units: 1 };
  if (c >= 0xd800 && c <= 0xdbff) {
    const d = text.charCodeAt(i + 1);
    return d >= 0xdc00 && d <= 0xdfff ? { bytes: 4, units: 2 } : { bytes: 6, units: 1 };
  }
  if (c >= 0xdc00 && c <= 0xdfff) return { bytes: 6, units: 1 };
  return { bytes: 3, units: 1 };
}

/** The bytes `text` takes as a JSON string in a body (without its quotes): JSON.stringify's, as jsonCost counts them. */
export function jsonBytes(text: string): number {
  return Buffer.byteLength(JSON.stringify(text)) - 2;
}

/** The length (in UTF-16 units) of the longest start of `text` that takes at most `maxBytes` as a JSON string; never half a surrogate pair. */
export function jsonPrefixLength(text: string, maxBytes: number): number {
  let bytes = 0;
  let i = 0;
  while (i < text.length) {
    const c = jsonCost(text, i);
    if (bytes + c.bytes > maxBytes) break;
    bytes += c.bytes;
    i += c.units;
  }
  return i;
}

/** How a result too large for a report was cut: what the report carries, and the rest. */
export interface CutResult {
  /** the start of the result, which the report carries (the note is added by the caller) */
  head: string;
  /** the rest of the result, from where it was cut */
  rest: string;
  /** UTF-8 bytes of the whole result, of the head and of the rest */
  totalBytes: number;
  headBytes: number;
  restBytes: number;
}

/**
 * Cut `result` when it would make a report of more than `maxReportBytes` (the coordinator's body
 * limit, from its registration answer) with `otherBytes` of other fields: undefined when it fits.
 * The head keeps as much of the result as fits with REPORT_ROOM_BYTES to spare.
 */
export function cutResult(result: string, maxReportBytes: number, otherBytes: number): CutResult | undefined {
  const room = maxReportBytes - REPORT_ROOM_BYTES - otherBytes;
  if (jsonBytes(result) <= room) return undefined;
  const at = jsonPrefixLength(result, Math.max(0, room));
  const head = result.slice(0, at);
  const rest = result.slice(at);
  const headBytes = Buffer.byteLength(head);
  const restBytes = Buffer.byteLength(rest);
  return { head, rest, totalBytes: headBytes + restBytes, headBytes, restBytes };
}

/** The longest end of `text` that takes at most `maxBytes` of UTF-8, never starting inside a character; `bytes`: its size. */
export function utf8End(text: string, maxBytes: number): { text: string; bytes: number } {
  const bytes = Buffer.from(text, 'utf8');
  let from = Math.max(0, bytes.length - Math.max(0, maxBytes));
  // not inside a character: on to the first byte of the next one (10xxxxxx continues one)
  while (from < bytes.length && (bytes[from]! & 0xc0) === 0x80) from++;
  return { text: bytes.subarray(from).toString('utf8'), bytes: bytes.length - from };
}

/** Where a cut result's rest goes: the job's output queue as it stands when the result is cut, and the coordinator's window of it. */
export interface RestRoom {
  jobId: string;
  /** the coordinator's body limit (max_report_bytes), for the note */
  maxReportBytes: number;
  /** the most output bytes the launcher queues for a job (Reporter.outputQueueMaxBytes) */
  queueMaxBytes: number;
  /** what of it the job's queue takes now without dropping any of the new text (Reporter.outputRoom) */
  queueRoomBytes: number;
  /** the most of a job's output the coordinator keeps (max_output_bytes); undefined from a coordinator older than it */
  keptBytes?: number | undefined;
  /** the byte offset, in the job's output, where the next output goes (Reporter.outputEnd) */
  outputEnd: number;
}

/** What becomes of a cut result: what goes to the job's output, what the report carries, what is logged. */
export interface PlacedRest {
  /** the line before the rest and the rest (or its end) that go to the job's output; '' when none of it can */
  output: string;
  /** the head of the result and the note saying where the rest is: the report's `result` */
  result: string;
  /** UTF-8 bytes of the rest that go to the output, and of its start left out */
  sentBytes: number;
  leftOutBytes: number;
  /** the warning the launcher logs */
  log: { fields: Record<string, number>; msg: string };
}

/**
 * The rest of a cut result goes to the end of the job's output, after a line that says what it is,
 * and the report's result ends with a note that says from which byte offset. It goes in as the
 * newest output, which the queue keeps first: the job's older output still waiting (the
 * coordinator away) is what the queue drops to make room for it, as for any new output.
 *
 * A rest larger than the coordinator keeps of a job's output (JOB_OUTPUT_MAX_BYTES, 1 MiB by
 * default, while a rest may be 10 MiB) goes without its start: the coordinator would drop that
 * start as the rest's end came in, and the note would point at bytes it no longer has. From a
 * coordinator that does not say how much it keeps, the bound is the launcher's queue (8 MiB). The
 * line, the note and the log say how much was left out, and why. (Were even that room gone, the
 * note says that the rest could not be sent rather than point at bytes that never went out.)
 */
export function placeRest(cut: CutResult, r: RestRoom): PlacedRest {
  const { jobId, maxReportBytes: max, queueMaxBytes: queueMax } = r;
  const byCoordinator = r.keptBytes !== undefined && r.keptBytes < r.queueRoomBytes;
  const room = byCoordinator ? r.keptBytes! : r.queueRoomBytes;
  const why = byCoordinator
    ? `more than the coordinator keeps of a job's output, ${r.keptBytes} bytes (JOB_OUTPUT_MAX_BYTES)`
    : `more than the launcher queues as a job's output, ${queueMax} bytes`;
  const line = (sent: number, leftOut: number) =>
    leftOut === 0
      ? `\n[agentq: the rest of the job's result (its last ${sent} of ${cut.totalBytes} bytes), cut from the result to fit in a report to the coordinator:]\n`
      : `\n[agentq: the end of the job's result (its last ${sent} of ${cut.totalBytes} bytes; the ${leftOut} bytes before them are left out, ` +
        `${why}), cut from the result to fit in a report to the coordinator:]\n`;
  let rest = cut.rest;
  let sent = cut.restBytes;
  if (cut.restBytes + Buffer.byteLength(line(cut.restBytes, 0)) > room) {
    // room for the longest line (its counts have at most as many digits as the rest's size)
    ({ text: rest, bytes: sent } = utf8End(rest, room - Buffer.byteLength(line(cut.restBytes, cut.restBytes))));
  }
  const leftOut = cut.restBytes - sent;
  const head = sent === 0 ? '' : line(sent, leftOut);
  const offset = r.outputEnd + Buffer.byteLength(head);
  const said = `${cut.head}\n\n[agentq: result cut: it is ${cut.totalBytes} bytes, more than a report to the coordinator may carry (${max} bytes in all); above are its first ${cut.headBytes} bytes. `;
  const logged = { result_bytes: cut.totalBytes, kept_bytes: cut.headBytes, max_report_bytes: max };
  const bound: Record<string, number> = byCoordinator ? { max_output_bytes: r.keptBytes! } : { max_queued_output_bytes: queueMax };
  const toTheLog = "result too large for a report to the coordinator: cut to fit; the rest goes to the job's output";
  if (sent === 0) {
    const nowhere = byCoordinator
      ? `the coordinator keeps only the newest ${r.keptBytes} bytes of a job's output (JOB_OUTPUT_MAX_BYTES), too few for any of them`
      : `the launcher's queue of the job's output (${queueMax} bytes) had no room for them`;
    return {
      output: '',
      result: `${said}The other ${cut.restBytes} bytes could not be sent: ${nowhere}.]`,
      sentBytes: 0,
      leftOutBytes: leftOut,
      log: {
        fields: { ...logged, rest_bytes: cut.restBytes, ...bound },
        msg: "result too large for a report to the coordinator: cut to fit; the rest could not be sent as the job's output and is lost",
      },
    };
  }
  // the figure the coordinator gave at registration; a coordinator older than max_output_bytes
  // does not say it, and the note names the setting and its default instead
  const keeps = outputKept(r.keptBytes);
  const where =
    leftOut === 0
      ? `The other ${cut.restBytes} bytes are at the end of the job's output`
      : `Of the other ${cut.restBytes} bytes, the last ${sent} are at the end of the job's output (the ${leftOut} before them were left out: ${why})`;
  return {
    output: head + rest,
    result:
      `${said}${where}, from byte offset ${offset}: GET /jobs/${jobId}/output?offset=${offset}, or \`agentq output ${jobId} --tail ${sent}\` ` +
      `(${keeps}).]`,
    sentBytes: sent,
    leftOutBytes: leftOut,
    log:
      leftOut === 0
        ? { fields: { ...logged, output_offset: offset }, msg: toTheLog }
        : {
            fields: { ...logged, output_offset: offset, rest_bytes: cut.restBytes, rest_left_out_bytes: leftOut, ...bound },
            msg: `${toTheLog} but for its start, which is ${byCoordinator ? "more than the coordinator keeps of a job's output" : "more than the launcher queues as a job's output"}`,
          },
  };
}
