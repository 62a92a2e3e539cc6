import { randomBytes } from 'node:crypto';
import { EventsQuery, LifecycleEvent, StreamGap } from '@agentq/protocol';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import type { Coordinator } from '../core/coordinator.js';
import type { SseClients } from './sse-clients.js';

/** OpenAPI only (the route writes the stream itself): what the stream carries. */
const eventsSchema = {
  operationId: 'streamEvents',
  tags: ['events'],
  summary: 'Stream lifecycle events',
  description:
    'Server-Sent Events: one message per lifecycle change, with `id:` (for Last-Event-ID), `event:` ' +
    '(the event type, e.g. `job.completed`) and `data:` (the JSON event). A `: keepalive` comment ' +
    'comes every 15 s (sooner with a short HTTP_IDLE_TIMEOUT_MS). Reconnecting with `Last-Event-ID` replays what was missed, preceded by a ' +
    '`stream.gap` event when some of it is no longer held. Job events leave the prompt out ' +
    '(`prompt_omitted: true`) unless `?include=prompt` is given. Past MAX_SSE_CLIENTS open streams, ' +
    '503 `too_many_clients`; a client that stops reading is disconnected. `HEAD /events` answers the headers only.',
  querystring: EventsQuery,
  headers: Type.Object({
    'last-event-id': Type.Optional(
      // decimal digits, as every event id is; anything else would silently resume nowhere
      Type.String({ pattern: '^[0-9]{0,15}$', description: 'resume after this event id (empty: as if absent)' }),
    ),
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

const STREAM_HEADERS = {
  'content-type': 'text/event-stream; charset=utf-8',
  'cache-control': 'no-cache',
  'x-accel-buffering': 'no',
};

/**
 * `GET /events`: Server-Sent Events of every lifecycle change. A client that reconnects with
 * `Last-Event-ID` gets the events it missed from the replay window; if some fell out of the
 * window it first gets a `stream.gap` event. The open streams and what they buffer are bounded
 * by `clients` (sse-clients.ts).
 */
/**
 * The newest part of a replay that takes at most `maxBytes`; what is older is a gap. Sent at once,
 * a replay larger than a stream may leave unread (SseClients) would cut the client it is for, and
 * the client, reconnecting with a slightly newer Last-Event-ID, would be cut again and again.
 */
export function fitReplay(
  replay: { events: LifecycleEvent[]; gap: boolean; oldestId: number },
  frame: (e: LifecycleEvent) => Buffer,
  maxBytes: number,
): { events: LifecycleEvent[]; gap: boolean; oldestId: number } {
  let start = replay.events.length;
  for (let bytes = 0; start > 0; start--) {
    bytes += frame(replay.events[start - 1]!).length;
    if (bytes > maxBytes) break;
  }
  if (start === 0) return replay;
  const events = replay.events.slice(start);
  return { events, gap: true, oldestId: events[0]?.id ?? replay.events.at(-1)!.id + 1 };
}

export const eventRoutes: FastifyPluginAsyncTypebox<{ core: Coordinator; clients: SseClients; keepaliveMs: number }> = async (
  app,
  { core, clients, keepaliveMs },
) => {
  // Streams never end by themselves: close them so the server can shut down.
  app.addHook('preClose', async () => clients.endAll());
  // names this process in the stream's opening comment: a client that reconnects to another
  // process (a restart, another coordinator) knows that what it holds may be stale, even when the
  // numbering of a memory store started afresh and has already passed its Last-Event-ID
  const processId = randomBytes(6).toString('hex');
  app.get('/events', { schema: eventsSchema }, async (req, reply) => {
    // HEAD: what a stream would start with, and no stream (it would never end)
    if (req.method === 'HEAD') return reply.code(200).headers(STREAM_HEADERS).send('' as never);
    clients.admit();
    // prompts can be large: events leave them out unless asked (a job's prompt is at GET /jobs/{id})
    const withPrompt = req.query.include === 'prompt';
    const frame = (e: LifecycleEvent) => (withPrompt ? core.events.framed(e).full() : core.events.framed(e).lean());
    const header = req.headers['last-event-id'];
    const lastId = header === undefined || header === '' ? undefined : Number(header);
    reply.hijack();
    const res = reply.raw;
    res.writeHead(200, { ...STREAM_HEADERS, connection: 'keep-alive' });
    // `keepalive K`: a comment comes at least every K ms, so a client that hears nothing for a few
    // times K knows the connection is dead (a NAT that forgot it, a sleeping network) and reconnects
    res.write(`retry: 2000\n: connected, last event id ${core.events.lastId}, coordinator ${processId}, keepalive ${keepaliveMs}\n\n`);
    // events are sent once each, in id order: the replay first, then what came in meanwhile
    let sentId = 0;
    let held: LifecycleEvent[] | undefined = [];
    const sendEvent = (e: LifecycleEvent) => {
      if (e.id <= sentId) return;
      sentId = e.id;
      client.send(frame(e));
    };
    let open = true;
    const end = () => {
      if (!open) return;
      open = false;
      clearInterval(keepalive);
      unsubscribe();
      client.remove();
      res.end();
    };
    const client = clients.add(res, req.log, end);
    const unsubscribe = core.events.subscribe((e) => (held ? held.push(e) : sendEvent(e)));
    const keepalive = setInterval(() => client.send(': keepalive\n\n'), keepaliveMs);
    res.once('close', end);
    if (res.destroyed) end(); // closed before the handler ran: 'close' will not come again
    if (lastId !== undefined) {
      // an id from before a restart of a store that numbers events afresh (memory:) is no guide:
      // the client gets a gap and every event from now on
      const fresh = !core.store.shared && lastId > core.events.lastId;
      sentId = fresh ? 0 : lastId;
      const gapFrame = (oldestId: number) =>
        `event: stream.gap\ndata: ${JSON.stringify({ type: 'stream.gap', oldest_available_id: oldestId })}\n\n`;
      try {
        // a shared store may read older events from the database: the live ones wait in `held`
        const replay = fresh ? { events: [], gap: true, oldestId: core.events.lastId + 1 } : await core.replayEvents(lastId);
        const { events, gap, oldestId } = fitReplay(replay, frame, clients.limits.maxUnreadPerClient / 2);
        if (gap) client.send(gapFrame(oldestId));
        for (const e of events) sendEvent(e);
      } catch (err) {
        req.log.warn({ err }, 'event replay failed');
        client.send(gapFrame(core.events.lastId + 1));
      }
    }
    for (const e of held) sendEvent(e);
    held = undefined;
  });
};
