import { Type, type Static } from '@sinclair/typebox';
import { Timestamp } from './common.js';
import { Job } from './jobs.js';
import { Launcher } from './launchers.js';
import { Session } from './sessions.js';

/** Lifecycle event names, as sent on `GET /events` (SSE `event:` field). */
export const JobEventTypes = [
  'job.created',
  'job.claimed',
  'job.requeued',
  'job.started',
  'job.stopping',
  'job.completed',
  'job.failed',
  'job.stopped',
  'job.interrupted',
  'job.timed_out',
  'job.evicted',
] as const;
/** `session.evicted`: history retention deleted the session; it carries its last version. */
export const SessionEventTypes = ['session.created', 'session.updated', 'session.evicted'] as const;
export const LauncherEventTypes = [
  'launcher.registered',
  'launcher.stale',
  'launcher.deregistering',
  'launcher.removed',
] as const;
export type JobEventType = (typeof JobEventTypes)[number];
export type SessionEventType = (typeof SessionEventTypes)[number];
export type LauncherEventType = (typeof LauncherEventTypes)[number];
export type EventType = JobEventType | SessionEventType | LauncherEventType;


/**
 * A job as carried by an event: the whole job, except that its `prompt` is left out (and
 * `prompt_omitted: true` set) unless the stream was opened with `?include=prompt`.
 */
export const EventJob = Type.Composite([
  Type.Omit(Job, ['prompt']),
  Type.Object({ prompt: Type.Optional(Type.String()), prompt_omitted: Type.Optional(Type.Literal(true)) }),
]);
export type EventJob = Static<typeof EventJob>;

/** The `data:` of one SSE message. `id` is also the SSE `id:` (use it as Last-Event-ID). */
export const LifecycleEvent = Type.Union([
  Type.Object({ id: Type.Integer(), type: Type.Union(JobEventTypes.map((x) => Type.Literal(x))), at: Timestamp, job: EventJob }),
  Type.Object({ id: Type.Integer(), type: Type.Union(SessionEventTypes.map((x) => Type.Literal(x))), at: Timestamp, session: Session }),
  Type.Object({ id: Type.Integer(), type: Type.Union(LauncherEventTypes.map((x) => Type.Literal(x))), at: Timestamp, launcher: Launcher }),
]);
export type LifecycleEvent = Static<typeof LifecycleEvent>;

/**
 * Sent once, first, when a client resumes with a Last-Event-ID older than the replay window:
 * events between were lost to it, so it should re-read the state it cares about.
 */
export const StreamGap = Type.Object({ type: Type.Literal('stream.gap'), oldest_available_id: Type.Integer() });
export type StreamGap = Static<typeof StreamGap>;

export const EventsQuery = Type.Object(
  {
    include: Type.Optional(
      Type.Literal('prompt', { description: 'send job prompts in events (left out by default; fetch a job by id instead)' }),
    ),
  },
  { additionalProperties: false },
);
export type EventsQuery = Static<typeof EventsQuery>;
