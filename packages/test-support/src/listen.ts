import type { Server } from 'node:http';
import type { TestContext } from 'node:test';

/**
 * Listen on a free port of 127.0.0.1 until the test ends (its open connections are closed then,
 * so a held request does not keep the test waiting): the server's `http://127.0.0.1:<port>` URL.
 */
export async function listenForTest(t: TestContext, server: Server): Promise<string> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.after(async () => {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('no port');
  return `http://127.0.0.1:${address.port}`;
}
