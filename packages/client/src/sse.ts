import { createParser, type EventSourceMessage, type ParseError } from 'eventsource-parser';

export interface SseMessage {
  /** the last event id seen on the stream (SSE keeps it until the server sends another) */
  id: string | null;
  /** the `event:` field, `message` when the server sent none (as browsers do) */
  event: string;
  data: string;
}

/**
 * A bound on what the parser may hold while a line or an event is incomplete. Events carry job
 * snapshots whose prompts may be tens of MiB (MAX_PROMPT_BYTES); a stream that never ends its
 * event is not one we can use, so past this it fails instead of growing without limit.
 */
const MAX_BUFFERED_CHARS = 256 * 1024 * 1024;

/**
 * Parse a text/event-stream body into messages. The parsing itself is `eventsource-parser`
 * (line endings, comments, `retry:`, multi-line `data:`); this adds the browser's defaults that
 * the parser leaves to its caller: the `message` event type and the sticky last event id.
 * Comments go to `onComment` (the coordinator opens with `: connected, last event id N, ...`).
 */
export async function* parseSse(
  body: AsyncIterable<Buffer | string>,
  onComment?: (comment: string) => void,
): AsyncGenerator<SseMessage> {
  const decoder = new TextDecoder();
  let lastId: string | null = null;
  const ready: SseMessage[] = [];
  let failure: ParseError | undefined;
  const parser = createParser({
    maxBufferSize: MAX_BUFFERED_CHARS,
    onEvent(e: EventSourceMessage) {
      if (e.id !== undefined) lastId = e.id;
      ready.push({ id: lastId, event: e.event ?? 'message', data: e.data });
    },
    ...(onComment ? { onComment } : {}),
    onError(err) {
      // unknown fields are ignored, as the SSE format requires; only an overflow is fatal
      if (err.type === 'max-buffer-size-exceeded') failure = err;
    },
  });
  for await (const chunk of body) {
    parser.feed(typeof chunk === 'string' ? chunk : decoder.decode(chunk, { stream: true }));
    if (failure) throw new Error(`event stream: ${failure.message}`, { cause: failure });
    while (ready.length > 0) yield ready.shift() as SseMessage;
  }
}
