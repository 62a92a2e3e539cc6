import { readFileSync } from 'node:fs';
import { getHeapStatistics } from 'node:v8';
import type { CoordinatorConfig } from './config.js';

/*
 * The limits that have a derived default (docs/operations.md, "Limits and timeouts"). They are
 * worked out once, when the app is built, from the configuration and the process's own limits.
 */

export interface ResolvedLimits {
  /** UTF-8 bytes of prompts pending jobs may hold (MAX_QUEUED_BYTES) */
  maxQueuedBytes: number;
  /** connections served normally (MAX_CONNECTIONS) */
  maxConnections: number;
  /** the largest request body, in bytes */
  bodyLimit: number;
  /** the open-file limit the connection default was derived from (null: unknown) */
  openFileLimit: number | null;
}

/** Worst case of JSON escaping: a control character is 1 byte of UTF-8 and 6 of JSON (`\u0001`). */
export const JSON_ESCAPE_FACTOR = 6;
/** room in a body for everything but the prompt (names, labels, paths, ...) */
const BODY_OVERHEAD = 64 * 1024;
/** file descriptors kept for everything but connections: the database, its WAL, logs, the launchers' pipes */
const FD_HEADROOM = 256;
const DEFAULT_MAX_CONNECTIONS = 10_000;

export function resolveLimits(config: CoordinatorConfig): ResolvedLimits {
  const openFileLimit = readOpenFileLimit();
  const maxQueuedBytes = queuedBytesLimit(config);
  const maxConnections =
    config.maxConnections ??
    (openFileLimit === null
      ? DEFAULT_MAX_CONNECTIONS
      : Math.max(16, Math.min(DEFAULT_MAX_CONNECTIONS, openFileLimit - FD_HEADROOM - config.connectionReserve)));
  return { maxQueuedBytes, maxConnections, bodyLimit: bodyLimitFor(config), openFileLimit };
}

/**
 * MAX_QUEUED_BYTES, or its default: pending prompts live on the heap (both local stores keep every
 * non-terminal job in memory), and a quarter of the heap limit leaves room for requests in flight,
 * the hot history and the event replay.
 */
export function queuedBytesLimit(config: Pick<CoordinatorConfig, 'maxQueuedBytes'>): number {
  return config.maxQueuedBytes ?? Math.floor(getHeapStatistics().heap_size_limit / 4);
}

/**
 * MAX_ANSWER_BYTES_IN_FLIGHT, or its default: a sixteenth of the heap limit (256 MiB of a 4 GiB
 * heap: 32 answers of the default MAX_ANSWER_BYTES). An answer's text is on the heap while it is
 * built and in a buffer until the client has read it.
 */
export function answerBytesInFlightLimit(config: Pick<CoordinatorConfig, 'maxAnswerBytesInFlight'>): number {
  return config.maxAnswerBytesInFlight ?? Math.floor(getHeapStatistics().heap_size_limit / 16);
}

/**
 * The body limit: a prompt of MAX_PROMPT_BYTES must fit however it is escaped (a client may send
 * every character as `\uXXXX`: up to 6 bytes of JSON per byte of prompt), and an output batch of
 * JOB_OUTPUT_MAX_BYTES with the same room. Never below 1 MiB.
 */
export function bodyLimitFor(config: Pick<CoordinatorConfig, 'maxPromptBytes' | 'outputMaxBytes'>): number {
  return Math.max(
    1024 * 1024,
    config.maxPromptBytes * JSON_ESCAPE_FACTOR + BODY_OVERHEAD,
    config.outputMaxBytes * 2 + BODY_OVERHEAD,
  );
}

/** The soft RLIMIT_NOFILE (Linux: /proc/self/limits); null where it cannot be read. */
export function readOpenFileLimit(): number | null {
  try {
    const line = readFileSync('/proc/self/limits', 'utf8')
      .split('\n')
      .find((l) => l.startsWith('Max open files'));
    const soft = line?.split(/\s{2,}/)[1];
    if (soft === undefined || soft === 'unlimited') return null;
    const n = Number(soft);
    return Number.isSafeInteger(n) && n > 0 ? n : null;
  } catch {
    return null;
  }
}
