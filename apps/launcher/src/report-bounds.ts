import { CompletedReport, FailedReport, OutputReport, StartedReport, StoppedReport } from '@agentq/protocol';
import type { TObject } from '@sinclair/typebox';
import { Value } from '@sinclair/typebox/value';
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

/** What a `failed` report says when the executor's own error message cannot be sent. */
export const NO_ERROR_MESSAGE = 'the executor reported an error without a message';

/**
 * The report as the coordinator's schema takes it. Executors are looser than the report schemas
 * (a session id of any length, turn counts past 1e9, an empty error message), and a report the
 * coordinator refuses is not sent again: the job would stay `running` for good. So each field is
 * checked against the report's schema, and one that does not fit is left out (an optional field)
 * or replaced (`error` of a `failed` report); NUL characters become U+FFFD (`storable`). Returns
 * the fields left out, for the log.
 */
export function conform(report: Report): { report: Report; dropped: string[] } {
  const schema = SCHEMAS[report.kind];
  const body: Record<string, unknown> = {};
  const dropped: string[] = [];
  let changed = false;
  for (const [field, sent] of Object.entries(report.body)) {
    if (sent === undefined) continue; // not sent anyway
    const value = typeof sent === 'string' ? storable(sent) : sent;
    changed ||= value !== sent;
    const property = schema.properties[field];
    if (property !== undefined && Value.Check(property, value)) body[field] = value;
    else dropped.push(field);
  }
  if (report.kind === 'failed' && body['error'] === undefined) body['error'] = NO_ERROR_MESSAGE;
  return { report: dropped.length === 0 && !changed ? report : ({ kind: report.kind, body } as Report), dropped };
}
