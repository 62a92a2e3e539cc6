/**
 * The floor of the mandated stack for parked long-polls (bench/throughput.ts, parked section): a
 * bare Fastify 5 app with the coordinator's route shape (`POST /launcher/sync`, a JSON body) that
 * parses each request and answers none, so every request stays parked. No schemas, hooks,
 * plugins or timers: what a parked request costs here, Fastify costs the coordinator too, on top
 * of Node's own (bench/raw-server.ts).
 *
 * `FLOOR_LOG=<file>` gives the app a pino logger at `info` writing to that file, as the
 * coordinator logs by default; without it, no logger. Fastify makes every request a child logger
 * (carrying its reqId) either way it logs, so this is the cost of a logger, not of lines: like
 * the coordinator at `info`, it writes no line for a parked poll (request lines are off here; the
 * coordinator writes a long-poll's at `debug`). Prints its port.
 */
import Fastify, { LogController, type FastifyReply } from 'fastify';
import { pino } from 'pino';

const logFile = process.env.FLOOR_LOG;
const app = Fastify(
  logFile
    ? {
        loggerInstance: pino({ level: 'info' }, pino.destination({ dest: logFile, sync: false })),
        logController: new LogController({ disableRequestLogging: true }),
      }
    : { logger: false },
);
const held: FastifyReply[] = [];
app.post('/launcher/sync', (_req, reply) => {
  held.push(reply);
  // a returned reply tells Fastify the answer comes later (it never does)
  return reply;
});
await app.listen({ port: 0, host: '127.0.0.1' });
app.log.info('listening');
console.log(JSON.stringify((app.server.address() as { port: number }).port));
process.on('SIGTERM', () => process.exit(0));
