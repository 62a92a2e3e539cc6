import type { Logger } from 'pino';
import { AgentqApiError, AgentqAuthError, delay, toError, type AgentqClient } from '@agentq/client';
import { describe, failedByCoordinator, type Connectivity } from './connectivity.js';
import type { Registration } from './registration.js';
import type { Supervisor } from './supervisor.js';

export interface HeartbeatOptions {
  client: AgentqClient;
  registration: Registration;
  supervisor: Supervisor;
  connectivity: Connectivity;
  log: Logger;
}

/** The longest a heartbeat waits for its answer: the client's usual bound, or one interval if shorter. */
const MAX_HEARTBEAT_WAIT_MS = 30_000;

/**
 * Heartbeats every `heartbeat_interval_seconds` (as announced at registration) with the ids of the
 * running jobs. The answer's `stop_jobs` is the safety net for a stop request whose poll answer
 * was lost; its limits (`max_report_bytes`, `max_output_bytes`) replace the registration's. A
 * failed heartbeat is retried at the next beat; the poller owns the backoff.
 *
 * A heartbeat not answered within one interval is given up: its connection may have died without
 * closing (a NAT or proxy that forgot it, on a kept-alive connection), and waiting the client's
 * 30 s on it would hold every later beat back, long enough for the coordinator to call a launcher
 * stale (LAUNCHER_HEARTBEAT_TIMEOUT need only exceed the interval) and interrupt its jobs. And the
 * next beat starts one interval after the last one started, not after it was given up: beats stay
 * an interval apart.
 */
export async function runHeartbeat(o: HeartbeatOptions, signal: AbortSignal): Promise<void> {
  const { client, registration, supervisor, connectivity } = o;
  const intervalMs = () => registration.settings.heartbeat_interval_seconds * 1000;
  // beats start one interval apart, however long the last one took to be answered or given up
  let next = Date.now() + intervalMs();
  while (!signal.aborted) {
    // delay() rejects when the signal aborts: that is the end of the loop, not an error
    await delay(Math.max(0, next - Date.now()), signal).catch(() => {});
    if (signal.aborted) return;
    next = Date.now() + intervalMs();
    const launcherId = registration.id!;
    try {
      const wait = Math.min(MAX_HEARTBEAT_WAIT_MS, registration.settings.heartbeat_interval_seconds * 1000);
      const res = await client.heartbeat(
        { launcher_id: launcherId, running_jobs: supervisor.runningIds },
        { signal, headersTimeoutMs: wait },
      );
      connectivity.ok();
      // answered as the launcher it still is (not one that registered again meanwhile)
      if (registration.id === launcherId) registration.limitsNow(res);
      for (const jobId of res.stop_jobs) supervisor.stop(jobId);
    } catch (err) {
      const e = toError(err);
      if (signal.aborted) return;
      if (e instanceof AgentqApiError && e.code === 'launcher_unknown') {
        try {
          await registration.renew(launcherId, signal);
        } catch (renewErr) {
          o.log.debug({ err: describe(toError(renewErr)) }, 'not registering again');
        }
      } else if (e instanceof AgentqAuthError) {
        o.log.error({ err: describe(e) }, 'heartbeat refused: the credential is not accepted');
      } else if (failedByCoordinator(e)) {
        // the coordinator answered (a 500 internal_error): not an outage; the next beat is at its time
        o.log.warn({ launcher_id: launcherId, status: e.status, code: e.code, err: describe(e) }, 'coordinator failed the heartbeat; the next one goes at its time');
      } else {
        connectivity.failed(e, 'heartbeat');
      }
    }
  }
}
