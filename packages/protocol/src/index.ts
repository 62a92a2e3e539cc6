/**
 * @agentq/protocol — every wire message of agentq as a TypeBox schema, with its static type.
 *
 * Glossary
 * - coordinator: the central HTTP service holding the job queue, launchers and sessions.
 * - launcher: a daemon on a host that long-polls the coordinator for jobs and runs them.
 * - executor: the program a launcher spawns for one job (e.g. the `claude` CLI driver).
 * - job: one agent turn (`start_session` or `resume_session`), with a lifecycle (see jobs.ts).
 * - session: the named conversation that jobs start and resume; may have a parent session.
 * - callback: when a child session's job ends, a `resume_session` job that tells its parent.
 * - terminal: a job status that can no longer change.
 */
export * from './common.js';
export * from './errors.js';
export * from './jobs.js';
export * from './launchers.js';
export * from './sessions.js';
export * from './events.js';
export * from './executor.js';
export * from './cli.js';
