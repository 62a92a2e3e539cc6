/**
 * How much of a job's output the coordinator keeps, as the launcher's messages say it. The
 * coordinator gives the figure (its JOB_OUTPUT_MAX_BYTES) at registration and in heartbeat
 * answers (`max_output_bytes`); one older than that field does not, and the setting's name and
 * default are said instead. A module of its own, with no imports: the claude-code executor, a
 * process of its own, says it too.
 */

/**
 * The variable through which an executor learns the figure, as the coordinator last said it when
 * the executor started (unset when it did not say): docs/executors.md.
 */
export const OUTPUT_MAX_BYTES_ENV = 'AGENTQ_JOB_OUTPUT_MAX_BYTES';

/** "the coordinator keeps the newest N bytes of a job's output (JOB_OUTPUT_MAX_BYTES)", or the setting and its default. */
export function outputKept(keptBytes: number | undefined): string {
  return keptBytes === undefined
    ? "the coordinator keeps the newest JOB_OUTPUT_MAX_BYTES of a job's output, 1 MiB by default"
    : `the coordinator keeps the newest ${keptBytes} bytes of a job's output (JOB_OUTPUT_MAX_BYTES)`;
}

/** The figure an executor was given in OUTPUT_MAX_BYTES_ENV; undefined when it is unset or not a positive integer. */
export function outputKeptFromEnv(env: Record<string, string | undefined>): number | undefined {
  const value = env[OUTPUT_MAX_BYTES_ENV];
  if (value === undefined || !/^[1-9]\d*$/.test(value)) return undefined;
  const n = Number(value);
  return Number.isSafeInteger(n) ? n : undefined;
}
