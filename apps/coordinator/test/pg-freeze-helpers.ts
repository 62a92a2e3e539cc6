import type { TestContext } from 'node:test';
import { AgentqClient } from '@agentq/client';
import { startCoordinator } from '../src/start.js';
import { awaitableLogger } from './helpers.js';
import { cuttableProxy } from './pg-server.js';

/**
 * A coordinator on `databaseUrl` through a `cuttableProxy`, with 2 s query and connect timeouts
 * (long enough that an ordinary statement on a loaded machine does not meet them), an info logger
 * whose lines can be awaited, and its client; all of it closed (the proxy thawed first) after the
 * test. The sweeper and long-polls are kept out of the way.
 */
export async function coordinatorThroughProxy(t: TestContext, databaseUrl: string) {
  const proxy = await cuttableProxy(t, databaseUrl);
  const { logger, logged } = awaitableLogger('info');
  const coordinator = await startCoordinator(
    { databaseUrl: proxy.url, databaseQueryTimeoutMs: 2000, databaseConnectTimeoutMs: 2000, pollTimeoutSeconds: 600, sweepIntervalMs: 600_000 },
    { logger },
  );
  const client = new AgentqClient({ url: coordinator.url, overloadRetries: 0 });
  t.after(async () => {
    proxy.thaw();
    await client.destroy();
    await coordinator.close();
  });
  return { proxy, logged, coordinator, client };
}
