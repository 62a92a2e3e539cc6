import { agentTokenJobId, verifyAgentToken } from '../../core/agent-tokens.js';
import type { Store } from '../../core/store/store.js';
import type { AuthOptions } from './plugin.js';

/** The auth plugin's view of agent tokens and of the session graph, read from the store. */
export function agentAuth(store: Store): Pick<AuthOptions, 'verifyAgentToken' | 'scope'> {
  return {
    async verifyAgentToken(token) {
      const jobId = agentTokenJobId(token);
      if (jobId === undefined) return undefined;
      const job = verifyAgentToken(token, await store.getJob(jobId));
      return job ? { jobId: job.id, sessionName: job.sessionName, tokenHash: job.agentTokenHash! } : undefined;
    },
    scope: {
      sessionOfJob: async (jobId) => (await store.getJob(jobId))?.sessionName,
      async parentOf(name) {
        const s = await store.getSession(name);
        return s === undefined ? undefined : s.parentName;
      },
    },
  };
}
