#!/usr/bin/env node
import { setMaxListeners } from 'node:events';
import { InterruptedError } from './errors.js';
import { run } from './run.js';

// The only place that touches the process: argv, env, streams, signals and the exit code.
const controller = new AbortController();
// every request of the run listens to it (until its answer is read): `cancel` of many ids, or a
// wait on more than 1000 jobs, has more than Node's default 10 at once, which is no leak
setMaxListeners(0, controller.signal);
let interrupts = 0;
const onSignal = () => {
  // first Ctrl-C: stop waiting (the job keeps running) and print the last snapshot; second: now
  if (++interrupts > 1) process.exit(130);
  controller.abort(new InterruptedError());
};
process.on('SIGINT', onSignal);
process.on('SIGTERM', onSignal);
// `agentq watch | head -3`: the reader went away, which is how such a pipe ends, not an error;
// any other failure to write (a full disk) is said in a line, not a stack trace
process.stdout.on('error', (err: NodeJS.ErrnoException) => {
  if (err.code === 'EPIPE') process.exit(0);
  process.stderr.write(`agentq: cannot write the output: ${err.message}\n`);
  process.exit(1);
});
// nobody reads stderr (a closed pipe): the exit code is all that is left to say it
process.stderr.on('error', () => {});

const code = await run(process.argv.slice(2), {
  env: process.env,
  stdout: process.stdout,
  stderr: process.stderr,
  // touched only by the commands that read stdin (`-p -`): opening it may hold a terminal
  stdin: { [Symbol.asyncIterator]: () => process.stdin[Symbol.asyncIterator]() },
  isTTY: process.stderr.isTTY === true,
  signal: controller.signal,
});
// let stdout drain (it may be a pipe) before the exit code is set
process.exitCode = code;
process.off('SIGINT', onSignal);
process.off('SIGTERM', onSignal);
