import { Type, type Static } from '@sinclair/typebox';
import { Nullable, Timestamp } from './common.js';
import { Job } from './jobs.js';
import { Launcher } from './launchers.js';
import { CallbackNotification, Session, SessionMessage } from './sessions.js';

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

/**
 * A session as carried by an event: the whole session, except that the texts it has queued for
 * its next turn (each pending message's `text`, each pending outcome's `result` and `error`) are
 * left out, and `pending_texts_omitted: true` set, unless the stream was opened with
 * `?include=prompt`. They are the next turn's prompt, and every message or outcome queued sends
 * the session again: with them, 1,000 messages would stream the first one 1,000 times.
 */
export const EventSession = Type.Composite([
  Type.Omit(Session, ['pending_messages', 'pending_callbacks']),
  Type.Object({
    pending_messages: Type.Array(Type.Composite([Type.Omit(SessionMessage, ['text']), Type.Object({ text: Type.Optional(Type.String()) })])),
    pending_callbacks: Type.Array(
      Type.Composite([
        Type.Omit(CallbackNotification, ['result', 'error']),
        Type.Object({ result: Type.Optional(Nullable(Type.String())), error: Type.Optional(Nullable(Type.String())) }),
      ]),
    ),
    pending_texts_omitted: Type.Optional(Type.Literal(true)),
  }),
]);
export type EventSession = Static<typeof EventSession>;

/** The `data:` of one SSE message. `id` is also the SSE `id:` (use it as Last-Event-ID). */
export const LifecycleEvent = Type.Union([
  Type.Object({ id: Type.Integer(), type: Type.Union(JobEventTypes.map((x) => Type.Literal(x))), at: Timestamp, job: EventJob }),
  Type.Object({ id: Type.Integer(), type: Type.Union(SessionEventTypes.map((x) => Type.Literal(x))), at: Timestamp, session: EventSession }),
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
      Type.Literal('prompt', {
        description:
          'send job prompts, and the texts sessions have queued (pending messages and outcomes), in events (left out by default; fetch the job or session instead)',
      }),
    ),
  },
  { additionalProperties: false },
);
export type EventsQuery = Static<typeof EventsQuery>;
