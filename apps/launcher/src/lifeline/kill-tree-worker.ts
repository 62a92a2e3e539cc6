/**
 * The worker thread killGroupTree runs killGroupTreeSync on: its passes over /proc (a second each
 * at 20 000 processes) then block this thread, not the launcher's event loop. workerData: the pgid.
 */
import { workerData } from 'node:worker_threads';
import { killGroupTreeSync } from './proc.js';

killGroupTreeSync((workerData as { pgid: number }).pgid);
