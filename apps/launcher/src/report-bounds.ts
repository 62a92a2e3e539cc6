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

/** What a `failed` report says when the executor's own error message cannot be sent. */
export const NO_ERROR_MESSAGE = 'the executor reported an error without a message';

/**
 * The report as the coordinator's schema takes it. Executors are looser than the report schemas
 * (a session id of any length, turn counts past 1e9, an empty error message), and a report the
 * coordinator refuses is not sent again: the job would stay `running` for good. So each field is
 * checked against the report's schema, and one that does not fit is left out (an optional field)
 * or replaced (`error` of a `failed` report). Returns the fields left out, for the log.
 */
export function conform(report: Report): { report: Report; dropped: string[] } {
  const schema = SCHEMAS[report.kind];
  const body: Record<string, unknown> = {};
  const dropped: string[] = [];
  for (const [field, value] of Object.entries(report.body)) {
    if (value === undefined) continue; // not sent anyway
    const property = schema.properties[field];
    if (property !== undefined && Value.Check(property, value)) body[field] = value;
    else dropped.push(field);
  }
  if (report.kind === 'failed' && body['error'] === undefined) body['error'] = NO_ERROR_MESSAGE;
  return { report: dropped.length === 0 ? report : ({ kind: report.kind, body } as Report), dropped };
}
