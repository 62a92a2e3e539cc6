import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { CoordinatorConfig } from '../config.js';
import type { Clock } from '../core/clock.js';
import { CoordinatorError } from '../core/errors.js';
import { accessFor } from './auth/plugin.js';

/**
 * Fixed windows of `windowMs` per key, each letting `max` through. A request takes its place when
 * it starts (so that concurrent requests cannot all pass a check that none has counted yet) and
 * gives it back if it turns out to create nothing.
 */
export class WindowLimiter {
  readonly #windows = new Map<string, { start: number; count: number }>();

  constructor(
    readonly max: number,
    readonly windowMs: number,
    private readonly now: () => number,
  ) {}

  /** Take a place for `key`: 0 when taken, else the milliseconds until the window has room. */
  take(key: string): number {
    const now = this.now();
    let w = this.#windows.get(key);
    if (w === undefined || now - w.start >= this.windowMs) {
      if (this.#windows.size >= 10_000) this.#prune(now);
      w = { start: now, count: 0 };
      this.#windows.set(key, w);
    }
    if (w.count >= this.max) return Math.max(1, w.start + this.windowMs - now);
    w.count++;
    return 0;
  }

  /** Give back a place taken in the current window (one taken in an earlier window is gone with it). */
  giveBack(key: string, takenAt: number): void {
    const w = this.#windows.get(key);
    if (w !== undefined && w.start <= takenAt && w.count > 0) w.count--;
  }

  #prune(now: number): void {
    for (const [key, w] of this.#windows) if (now - w.start >= this.windowMs) this.#windows.delete(key);
  }
}

/** Who a request's creations count against: its token, the agent's session, or its address (auth off). */
function keyOf(req: FastifyRequest): string {
  const p = req.principal;
  return p.kind === 'token' ? `token:${p.name}` : p.kind === 'agent' ? `agent:${p.sessionName}` : `ip:${req.ip}`;
}

/**
 * The optional per-token limit on job creation (`JOBS_RATE_LIMIT_PER_MINUTE`) on the routes that
 * ROUTE_ACCESS marks `rateLimited`: a request that creates (201; a batch counts once) counts; one
 * refused (400, 404, 409, 422, ...) or answered from its Idempotency-Key (200) does not. Checked
 * once the token and the body are (preHandler): 429 `rate_limited` with Retry-After beyond.
 */
export function installCreationLimit(app: FastifyInstance, config: CoordinatorConfig, clock: Clock): void {
  const max = config.jobsRateLimitPerMinute;
  if (max <= 0) return;
  const limiter = new WindowLimiter(max, 60_000, () => clock.now());
  app.addHook('preHandler', (req, reply, done) => {
    if (!accessFor(req)?.rateLimited) return done();
    const key = keyOf(req);
    const waitMs = limiter.take(key);
    if (waitMs > 0) {
      const retryAfter = Math.ceil(waitMs / 1000);
      throw new CoordinatorError('rate_limited', `more than ${max} job creations per minute; retry in ${retryAfter} s`, {
        limit_per_minute: max,
        retry_after_seconds: retryAfter,
      });
    }
    // given back when the request ends without creating: on 'close', which comes also when the
    // client goes away before its answer (a hook on the answer would not run then)
    const at = clock.now();
    reply.raw.once('close', () => {
      if (reply.statusCode !== 201) limiter.giveBack(key, at);
    });
    done();
  });
}
