import { errorCodes, type FastifyInstance, type FastifyRequest } from 'fastify';
import { BodyTooWide, checkBodyShape } from './body-shape.js';
import { InvalidJson, JsonThread } from './json-thread.js';
import { BodyTooDeep, checkEncoding, checkUtf8, ForbiddenKey, holdsForbiddenKey, wellFormed } from './well-formed.js';

/**
 * Runs tasks one per turn of the event loop. Node runs every `setImmediate` callback queued before
 * its check phase in that phase, but one queued from inside it in the next turn, after the poll
 * phase has served the sockets that became ready meanwhile: chaining one immediate per task lets
 * I/O in between any two of them.
 */
export class OnePerTurn {
  readonly #tasks: (() => void)[] = [];
  #head = 0;
  #scheduled = false;

  get waiting(): number {
    return this.#tasks.length - this.#head;
  }

  run(task: () => void): void {
    this.#tasks.push(task);
    if (this.#scheduled) return;
    this.#scheduled = true;
    setImmediate(this.#next);
  }

  readonly #next = (): void => {
    const task = this.#tasks[this.#head]!;
    this.#tasks[this.#head++] = undefined as unknown as () => void;
    if (this.#head === this.#tasks.length) {
      this.#tasks.length = 0;
      this.#head = 0;
    }
    try {
      task();
    } finally {
      if (this.waiting > 0) setImmediate(this.#next);
      else this.#scheduled = false;
    }
  };
}

/** Bodies from this size on are parsed on the JSON thread and handled one per turn of the event loop. */
export const LARGE_BODY_BYTES = 64 * 1024;

/**
 * The JSON body parser: Fastify's own for small bodies (the same errors, the same protection
 * against `__proto__` and `constructor` keys, whose refusal says why: ForbiddenKey). A large body (a prompt of a megabyte) takes
 * milliseconds to decode and parse, and then to validate, store, answer and hand out; a burst of
 * them, each ready at once, would be worked through in one go while `/health`, launchers' polls
 * and every small request waited for all of them. So a large body is parsed on a thread of its own
 * (json-thread.ts), and what follows from it (until it next waits) runs in a turn of the event loop
 * of its own: other requests are served between any two (docs/operations.md, "Limits and
 * timeouts").
 */
export function installJsonBodyParser(app: FastifyInstance): void {
  const parse = app.getDefaultJsonParser('error', 'error');
  const thread = new JsonThread();
  const turns = new OnePerTurn();
  app.addHook('onClose', async () => thread.close());
  app.removeContentTypeParser('application/json');
  // a compressed body is refused before it is read, whatever its content type (after the
  // onRequest hooks: a request without a valid token learns nothing of what the body should be)
  app.addHook('preParsing', (req, _reply, payload, done) => {
    // Fastify reads no body of these
    if (req.method === 'GET' || req.method === 'HEAD') return done(null, payload);
    try {
      checkEncoding(req.headers);
    } catch (err) {
      return done(err as Error, payload);
    }
    done(null, payload);
  });
  // strings made well formed (well-formed.ts) whichever thread parsed the body
  // (its shape looked at first, whichever path brought it here: a small body, or a large one whose
  // thread is gone)
  const parseHere = (req: FastifyRequest, bytes: Buffer, done: (err: Error | null, body?: unknown) => void) => {
    try {
      checkBodyShape(bytes);
    } catch (err) {
      return done(err as Error, undefined);
    }
    const text = bytes.toString('utf8');
    parse(req, text, (err: Error | null, value?: unknown) => {
      // Fastify's parser says "not valid JSON" for a forbidden key too (ForbiddenKey)
      if (err) return done((err as { code?: string }).code === 'FST_ERR_CTP_INVALID_JSON_BODY' && holdsForbiddenKey(text) ? new ForbiddenKey() : err, undefined);
      let body: unknown;
      try {
        body = wellFormed(value);
      } catch (e) {
        return done(e as Error, undefined);
      }
      done(null, body);
    });
  };
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (req, body: Buffer, done) => {
    try {
      checkUtf8(req.headers['content-type'], body);
    } catch (err) {
      return done(err as Error, undefined);
    }
    // a large body's shape is looked at on the JSON thread
    if (body.length < LARGE_BODY_BYTES) return parseHere(req, body, done);
    thread.parse(body).then(
      (value) => turns.run(() => done(null, value)),
      (err: unknown) => {
        if (err instanceof InvalidJson) return turns.run(() => done(new errorCodes.FST_ERR_CTP_INVALID_JSON_BODY(), undefined));
        if (err instanceof BodyTooDeep || err instanceof BodyTooWide || err instanceof ForbiddenKey) return turns.run(() => done(err, undefined));
        // the thread is gone (it is started again for the next body): parse here, as for a small body
        req.log.error({ err }, 'the JSON thread failed; parsing on the main thread');
        turns.run(() => parseHere(req, body, done));
      },
    );
  });
}
