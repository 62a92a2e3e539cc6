/**
 * The floor for parked long-polls (bench/throughput.ts, parked section): a bare node:http server
 * that reads each request and answers none, so every request stays parked. Whatever a parked
 * request costs here, Node's HTTP server costs the coordinator too. Prints its port.
 */
import { createServer, type ServerResponse } from 'node:http';

const held: ServerResponse[] = [];
const server = createServer((req, res) => {
  req.resume();
  held.push(res);
});
server.listen(0, '127.0.0.1', () => console.log(JSON.stringify((server.address() as { port: number }).port)));
process.on('SIGTERM', () => process.exit(0));
