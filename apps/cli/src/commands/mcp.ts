import type { Command } from 'commander';
import { coordinatorClient, DEFAULT_URL, type GlobalOptions } from '../context.js';
import { commandHelpAfter } from '../help.js';
import { serveStdio } from '../mcp/server.js';
import type { Act } from '../program.js';
import { cliVersion } from '../run.js';

/**
 * `agentq mcp`: serve the agentq tools to an MCP client over stdio (docs/mcp.md). Inside a job it
 * acts as the job's session (AGENTQ_SESSION_NAME, AGENTQ_JOB_ID) with the job's token
 * (AGENTQ_TOKEN); the launcher's claude-code executor starts it for every turn.
 */
export function registerMcp(program: Command, act: Act): void {
  program
    .command('mcp')
    .summary('serve the agentq tools to an agent: a stdio MCP server (start_session, send_message, ...)')
    .description(
      'Serve the agentq tools over stdio with the Model Context Protocol: start_session, resume_session, send_message, ' +
        'get_status, wait_for_jobs, list_children, get_output and stop. Stdout carries the protocol; it runs until stdin closes, then answers the calls in flight and exits.',
    )
    .addHelpText(
      'after',
      commandHelpAfter(
        'Inside an agentq job (AGENTQ_SESSION_NAME set by the launcher) new sessions are children\n' +
          'of the calling session, so their results resume it. The coordinator URL comes from --url,\n' +
          'else AGENTQ_URL, else AGENTQ_COORDINATOR_URL; the token from --token, else AGENTQ_TOKEN.',
      ),
    )
    .action(
      act(async (ctx, cmd) => {
        const env = ctx.io.env;
        const o = cmd.optsWithGlobals<GlobalOptions>();
        // the launcher sets AGENTQ_COORDINATOR_URL for every executor; AGENTQ_URL is the CLI's own name.
        // Either is a comma list for a launcher with several coordinators: checked and failed over as by every command
        const client = coordinatorClient({
          url: o.url ?? (env.AGENTQ_URL || env.AGENTQ_COORDINATOR_URL || DEFAULT_URL),
          token: o.token ?? (env.AGENTQ_TOKEN || undefined),
          caFile: o.caFile ?? (env.AGENTQ_CA_FILE || undefined),
          // no limit: every tool call in flight gets a connection, so calls parked in long-polls
          // (wait_for_jobs, get_output's wait_ms, up to 50 s each) never hold up the others; how
          // many there are is up to the one agent this server serves
          connections: null,
          // none: every tool sends its calls again itself (mcp/outage.ts), within the time a tool
          // call has, and answers a refusal for now with its Retry-After; the client's own waits
          // (up to a minute each, as a rate limit may ask) would outlast that time, and the call
          // would be answered "did not answer" though the coordinator did
          overloadRetries: 0,
        });
        const caller = {
          ...(env.AGENTQ_SESSION_NAME ? { sessionName: env.AGENTQ_SESSION_NAME } : {}),
          ...(env.AGENTQ_JOB_ID ? { jobId: env.AGENTQ_JOB_ID } : {}),
        };
        try {
          await serveStdio({ client, caller }, cliVersion(), {
            input: process.stdin,
            output: process.stdout,
            errors: process.stderr,
            ...(ctx.signal ? { signal: ctx.signal } : {}),
          });
        } finally {
          // waits still parked on the coordinator are not waited for
          await client.destroy();
        }
        // everything went over stdout as protocol messages: nothing more to print
        return { data: undefined, exitCode: 0, text: () => '' };
      }),
    );
}
