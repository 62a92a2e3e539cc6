import { EventsQuery, LifecycleEvent, StreamGap } from '@agentq/protocol';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import type { Coordinator } from '../core/coordinator.js';

const KEEPALIVE_MS = 15_000;
/**
 * The least number of bytes an SSE client may leave unread before it is cut off. A dashboard
 * that stopped reading (a sleeping laptop keeps its TCP connection) would otherwise make the
 * server buffer every event forever; cut off, it reconnects with Last-Event-ID and gets the
 * replay (or stream.gap).
 */
const MIN_UNREAD_CAP = 16 * 1024 * 1024;

/** OpenAPI only (the route writes the stream itself): what the stream carries. */
const eventsSchema = {
  operationId: 'streamEvents',
  tags: ['events'],
  summary: 'Stream lifecycle events',
  description:
    'Server-Sent Events: one message per lifecycle change, with `id:` (for Last-Event-ID), `event:` ' +
    '(the event type, e.g. `job.completed`) and `data:` (the JSON event). A `: keepalive` comment ' +
    'comes every 15 s. Reconnecting with `Last-Event-ID` replays what was missed, preceded by a ' +
    '`stream.gap` event when some of it is no longer held. Job events leave the prompt out ' +
    '(`prompt_omitted: true`) unless `?include=prompt` is given.',
  querystring: EventsQuery,
  headers: Type.Object({
    'last-event-id': Type.Optional(Type.String({ description: 'resume after this event id' })),
  }),
  response: {
    200: {
      description: 'An endless text/event-stream',
      content: {
        'text/event-stream': {
          schema: Type.Union([LifecycleEvent, StreamGap], { description: 'the `data:` of each message' }),
        },
      },
    },
  },
};

/**
 * `GET /events`: Server-Sent Events of every lifecycle change. A client that reconnects with
 * `Last-Event-ID` gets the events it missed from the replay window; if some fell out of the
 * window it first gets a `stream.gap` event.
 */
export const eventRoutes: FastifyPluginAsyncTypebox<{ core: Coordinator; streams?: Set<() => void> }> = async (
  app,
  { core, streams },
) => {
  // every job event carries the prompt: leave room for a burst of events about large prompts
  const maxUnread = Math.max(MIN_UNREAD_CAP, core.config.maxPromptBytes * 8);
  /** the open streams (how to end each); the caller may pass the set to count them */
  const open = streams ?? new Set<() => void>();
  // Streams never end by themselves: close them so the server can shut down.
  app.addHook('preClose', async () => {
    for (const end of [...open]) end();
  });
  app.get('/events', { schema: eventsSchema }, async (req, reply) => {
    // prompts can be large: events leave them out unless asked (a job's prompt is at GET /jobs/{id})
    const withPrompt = req.query.include === 'prompt';
    const frame = (e: LifecycleEvent) => (withPrompt ? core.events.framed(e).full() : core.events.framed(e).lean());
    const header = req.headers['last-event-id'];
    const lastId = header === undefined ? undefined : Number(Array.isArray(header) ? header[0] : header);
    reply.hijack();
    const res = reply.raw;
    res.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-cache',
      connection: 'keep-alive',
      'x-accel-buffering': 'no',
    });
    res.write(`retry: 2000\n: connected, last event id ${core.events.lastId}\n\n`);
    // events are sent once each, in id order: the replay first, then what came in meanwhile
    let sentId = 0;
    let held: LifecycleEvent[] | undefined = [];
    const sendEvent = (e: LifecycleEvent) => {
      if (e.id <= sentId) return;
      sentId = e.id;
      send(frame(e));
    };
    const send = (text: string) => {
      if (!res.write(text) && res.writableLength > maxUnread) {
        req.log.warn({ unread_bytes: res.writableLength }, 'event stream client is not reading; disconnected');
        end();
        res.destroy(); // drop what is buffered: end() alone would keep it queued behind the client
      }
    };
    const unsubscribe = core.events.subscribe((e) => (held ? held.push(e) : sendEvent(e)));
    const keepalive = setInterval(() => send(': keepalive\n\n'), KEEPALIVE_MS);
    const end = () => {
      if (!open.delete(end)) return;
      clearInterval(keepalive);
      unsubscribe();
      res.end();
    };
    open.add(end);
    res.once('close', end);
    if (lastId !== undefined && Number.isFinite(lastId)) {
      sentId = lastId;
      try {
        // a shared store may read older events from the database: the live ones wait in `held`
        const { events, gap, oldestId } = await core.replayEvents(lastId);
        if (gap) send(`event: stream.gap\ndata: ${JSON.stringify({ type: 'stream.gap', oldest_available_id: oldestId })}\n\n`);
        for (const e of events) sendEvent(e);
      } catch (err) {
        req.log.warn({ err }, 'event replay failed');
        send(`event: stream.gap\ndata: ${JSON.stringify({ type: 'stream.gap', oldest_available_id: core.events.lastId + 1 })}\n\n`);
      }
    }
    for (const e of held) sendEvent(e);
    held = undefined;
  });
};
