/*
 * Helpers shared by the tests of the apps (apps/coordinator, apps/launcher, apps/cli): what a test
 * runs and the order it is ended in, processes that must not outlive the test process, temporary
 * directories and ports, the end of a job, a test's local HTTP server. Test code only: no product
 * code imports this package.
 */
export { endRunning, trackRunning } from './running.js';
export { tempDir } from './temp-dir.js';
export { killOnExit } from './kill-on-exit.js';
export { alive, gone } from './processes.js';
export { heldPort, onPortAgain } from './port.js';
export { goneOrKilledAfter, standInTestProcess } from './stand-in.js';
export { closedBeforeRemoval } from './closed-before-removal.js';
export { jobEnd } from './job-end.js';
export { listenForTest } from './listen.js';
