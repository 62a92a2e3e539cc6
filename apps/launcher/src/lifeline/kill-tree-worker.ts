/**
 * The worker thread killGroupTree runs killGroupTreeSync on: its passes over /proc (a second each
 * at 20 000 processes) then block this thread, not the launcher's event loop. workerData: the
 * group (checked here, see killGroupTree) or a bare pgid.
 */
import { workerData } from 'node:worker_threads';
import { killSameGroupTree, type Group } from './proc.js';

killSameGroupTree(workerData as Group | number);
