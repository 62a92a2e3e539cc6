import { AgentqApiError, AgentqConnectionError, backoffDelay, delay } from '@agentq/client';
import {
  JobEventTypes,
  LauncherEventTypes,
  SessionEventTypes,
  type LifecycleEvent,
  type StreamGap,
} from '@agentq/protocol';
import { InvalidArgumentError, Option, type Command } from 'commander';
import { intArg, listArg, nameArg } from '../args.js';
import type { CommandContext, CommandResult } from '../context.js';
import type { Act } from '../program.js';
import { writeJson } from '../envelope.js';
import { seedJob } from '../render.js';
import { printable, printableLine as line } from '../table.js';

interface WatchOptions {
  type?: string[];
  session?: string;
  job?: string;
  count?: number;
  since?: number;
}

type StreamEvent = LifecycleEvent | StreamGap;

const NOTES = `
Prints one line per lifecycle event of the coordinator (GET /events) until Ctrl-C, or until
--count events were printed. With --json every line is an envelope {"ok":true,"data":event}.
If the stream breaks, watch reconnects and resumes after the last event it printed.
Event types: job.created, job.claimed, job.requeued, job.started, job.stopping, job.completed,
job.failed, job.stopped, job.interrupted, job.timed_out, job.evicted, session.created,
session.updated, session.evicted, launcher.registered, launcher.stale, launcher.deregistering,
launcher.removed.`;

export function registerWatch(program: Command, act: Act): void {
  program
    .command('watch')
    .summary('live events: jobs, sessions and launchers as they change')
    .addOption(
      new Option(
        '--type <types>',
        'only these event types or groups, comma-separated (e.g. job.completed,launcher)',
      ).argParser(typesArg),
    )
    .addOption(new Option('--session <name>', 'only events of this session and its jobs').argParser(nameArg('a session name')))
    .addOption(new Option('--job <job_id>', 'only events of this job').argParser(nameArg('a job id (job_…)')))
    .addOption(
      new Option('--count <n>', 'exit 0 after printing this many events').argParser(intArg(1, Number.MAX_SAFE_INTEGER)),
    )
    .addOption(
      new Option(
        '--since <event_id>',
        'first replay the events after this id (the coordinator keeps the last ones)',
      ).argParser(intArg(0, Number.MAX_SAFE_INTEGER)),
    )
    .addHelpText('after', NOTES)
    .action(act(watch));
}

const EVENT_GROUPS = ['job', 'session', 'launcher'] as const;
const EVENT_TYPES: readonly string[] = [...JobEventTypes, ...SessionEventTypes, ...LauncherEventTypes];

/**
 * `--type`: event types and groups (`job`, or `job.*`). A name that is neither is a usage error:
 * a typo (`job.complete`) would otherwise match nothing, and watch would print nothing for ever.
 */
function typesArg(text: string): string[] {
  const types = listArg(text);
  if (types.length === 0) throw new InvalidArgumentError('name at least one event type or group.');
  for (const t of types) {
    if (!EVENT_TYPES.includes(t) && !(EVENT_GROUPS as readonly string[]).includes(groupOf(t))) {
      throw new InvalidArgumentError(
        `'${t}' is not an event type: use a group (${EVENT_GROUPS.join(', ')}) or one of ${EVENT_TYPES.join(', ')}.`,
      );
    }
  }
  return types;
}

/** A selection as a group or type name: `job.*` is the group `job`. */
const groupOf = (selected: string): string => selected.replace(/\.\*$/, '');

/** Does `type` belong to one of the selected types or groups (`job` = every `job.*`)? */
function typeMatches(type: string, selected: readonly string[]): boolean {
  return selected.some((s) => {
    const group = groupOf(s);
    return type === group || type.startsWith(`${group}.`);
  });
}

function matches(e: StreamEvent, o: WatchOptions): boolean {
  if (e.type === 'stream.gap') return true; // about the stream itself: always worth knowing
  if (o.type && !typeMatches(e.type, o.type)) return false;
  if (o.job !== undefined && !('job' in e && e.job.job_id === o.job)) return false;
  if (o.session !== undefined) {
    const session = 'job' in e ? e.job.session_name : 'session' in e ? e.session.session_name : undefined;
    if (session !== o.session) return false;
  }
  return true;
}

/** One event as a line for people: local time, type, what it is about (control characters shown, not sent). */
export function renderEvent(e: StreamEvent): string {
  return printable(eventLine(e));
}

function eventLine(e: StreamEvent): string {
  if (e.type === 'stream.gap') {
    return `(events before #${e.oldest_available_id} were missed: the coordinator no longer has them)`;
  }
  const time = new Date(e.at).toTimeString().slice(0, 8);
  const head = `${time}  ${line(e.type).padEnd(21)}`;
  if ('job' in e) {
    const j = seedJob(e.job);
    const where = j.launcher_id ? `  on ${line(j.launcher_id)}` : '';
    const why = j.error
      ? `: ${line(j.error.split('\n')[0] ?? '')}`
      : j.status === 'pending' && j.pending_reason
        ? `: ${line(j.pending_reason)}`
        : '';
    return `${head}  ${line(j.job_id)}  ${line(j.session_name)}  ${line(j.status)}${where}${why}`;
  }
  if ('session' in e) return `${head}  ${line(e.session.session_name)}  ${line(e.session.status)}`;
  // an event type a newer coordinator added, about something else: its type is what there is to show
  if (!('launcher' in e) || typeof e.launcher !== 'object' || e.launcher === null) return head.trimEnd();
  const l = e.launcher;
  // a removed launcher's object is as last seen (online, stale): "online" alone read as if it still were
  const status = e.type === 'launcher.removed' ? `removed (was ${l.status})` : l.status;
  return `${head}  ${line(l.launcher_id)}  ${line(l.hostname ?? '-')}  ${line(status)}`;
}

/**
 * `agentq watch`: follow `GET /events`. A stream that breaks after it worked once is resumed
 * (Last-Event-ID, capped backoff); one that never connects is an error like any request's.
 */
async function watch(ctx: CommandContext, cmd: Command): Promise<CommandResult> {
  const o = cmd.opts<WatchOptions>();
  const stop = new AbortController();
  const onAbort = () => stop.abort();
  if (ctx.signal?.aborted) stop.abort();
  ctx.signal?.addEventListener('abort', onAbort, { once: true });
  let lastId: string | number | undefined = o.since;
  let printed = 0;
  let connected = false;
  let attempt = 0;
  /** coordinators tried before the stream first opened (the client moves to the next on failure) */
  let tried = 0;
  try {
    while (!stop.signal.aborted) {
      try {
        const stream = ctx.client.events({
          ...(lastId === undefined ? {} : { lastEventId: lastId }),
          signal: stop.signal,
          onOpen: () => {
            connected = true;
            attempt = 0;
          },
          // no event seen yet: resume after the newest one there was when the stream opened, which
          // the coordinator names as it opens; without an id a reconnect would start from "now",
          // and what happened while the stream was down would be missed without a word
          onComment: (comment) => {
            const opened = /last event id (\d+)/.exec(comment);
            if (opened && lastId === undefined) lastId = Number(opened[1]);
          },
        });
        for await (const msg of stream) {
          if (msg.id !== null) lastId = msg.id;
          const event = JSON.parse(msg.data) as StreamEvent;
          if (!matches(event, o)) continue;
          if (ctx.json) writeJson(ctx.io, { ok: true, data: event });
          else ctx.io.stdout.write(`${renderEvent(event)}\n`);
          // a gap notice is about the stream, not an event: it does not count
          if (o.count !== undefined && event.type !== 'stream.gap' && ++printed >= o.count) stop.abort();
          if (stop.signal.aborted) break;
        }
      } catch (err) {
        if (stop.signal.aborted) break;
        // never connected: the next coordinator URL, if one is left untried (the client moved on);
        // else report it like any command (unreachable, refused, no such route)
        if (!connected && err instanceof AgentqConnectionError && ++tried < ctx.client.urls.length) continue;
        if (!connected || (err instanceof AgentqApiError && err.isFinal)) throw err;
      }
      if (stop.signal.aborted) break;
      ctx.io.stderr.write(
        `agentq: event stream lost; reconnecting${lastId === undefined ? '' : ` after event ${lastId}`}\n`,
      );
      await delay(backoffDelay(attempt++, { baseMs: 500, maxMs: 10_000 }), stop.signal).catch(() => {});
    }
  } finally {
    ctx.signal?.removeEventListener('abort', onAbort);
  }
  // the events were printed as they came: nothing more to print, exit 0 (Ctrl-C is the usual end)
  return { data: undefined, exitCode: 0, text: () => '' };
}
