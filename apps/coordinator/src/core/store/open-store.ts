import { mkdirSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import type { Logger } from 'pino';
import type { CoordinatorConfig } from '../../config.js';
import type { Clock } from '../clock.js';
import { MemoryStore } from './memory-store.js';
import type { Store } from './store.js';

/** The store DATABASE_URL names: `memory:`, `sqlite:<path>` (relative to the working directory) or `postgres://…`. */
export async function openStore(config: CoordinatorConfig, deps: { clock: Clock; log: Logger }): Promise<Store> {
  const url = config.databaseUrl;
  const options = { clock: deps.clock, log: deps.log, outputMaxBytes: config.outputMaxBytes, sessionListMax: config.maxSessionListItems };
  if (url === 'memory:') return new MemoryStore(options);
  if (url.startsWith('sqlite:')) {
    const path = resolve(url.slice('sqlite:'.length));
    mkdirSync(dirname(path), { recursive: true });
    const { SqliteStore } = await import('./sqlite-store.js');
    return SqliteStore.open(path, { ...options, hotJobs: config.hotJobs, hotSessions: config.hotSessions });
  }
  const { PostgresStore } = await import('./postgres-store.js');
  return PostgresStore.open(url, {
    ...options,
    pollTimeoutSeconds: config.pollTimeoutSeconds,
    eventReplaySize: config.eventReplaySize,
    poolSize: config.databasePoolSize,
    connectTimeoutMs: config.databaseConnectTimeoutMs,
    queryTimeoutMs: config.databaseQueryTimeoutMs,
  });
}
