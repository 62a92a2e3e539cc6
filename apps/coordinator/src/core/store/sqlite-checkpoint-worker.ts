import { parentPort, workerData } from 'node:worker_threads';
import Database from 'better-sqlite3';
import type { CheckpointRequest, CheckpointResult } from './sqlite-checkpointer.js';

/*
 * The SQLite store's checkpointer thread (sqlite-checkpointer.ts). Each request is one PASSIVE
 * checkpoint on a connection of its own: it copies the WAL's pages into the database file and
 * syncs both without ever blocking the coordinator's writes, so the copying and the fsyncs (tens
 * to hundreds of milliseconds for tens of megabytes) happen here instead of on the thread that
 * answers requests.
 */

const { path } = workerData as { path: string };
const port = parentPort!;
const db = new Database(path, { fileMustExist: true });
db.pragma('busy_timeout = 1000');

port.on('message', (m: CheckpointRequest) => {
  if (m === 'close') {
    db.close();
    port.close();
    return;
  }
  const started = performance.now();
  let result: CheckpointResult;
  try {
    const [r] = db.pragma('wal_checkpoint(PASSIVE)') as { busy: number; log: number; checkpointed: number }[];
    result = { ok: true, frames: r!.log, checkpointed: r!.checkpointed, ms: performance.now() - started };
  } catch (err) {
    const e = err as Error & { code?: string };
    result = { ok: false, error: e.message, code: e.code ?? null, ms: performance.now() - started };
  }
  port.postMessage(result);
});
