/**
 * Wait (on the coordinator, with `client.waitJob`: no sleeps) until the job is terminal. No bound
 * of its own: a loaded CI machine ran a 16 MiB output through a launcher in 28 s, so a fixed 30 s
 * failed jobs that were still doing fine. The test's own timeout (most often its file's, 10
 * minutes) bounds a job that never ends; meanwhile every 30 s it says on stderr which job it waits
 * for. (Typed by shape: this package does not depend on the client.)
 */
export async function jobEnd<J extends { terminal: boolean; status: string }>(
  client: { waitJob(jobId: string, timeoutMs: number): Promise<J> },
  jobId: string,
): Promise<J> {
  for (let waited = 30; ; waited += 30) {
    const job = await client.waitJob(jobId, 30_000);
    if (job.terminal) return job;
    // a file cut off at its timeout says which job never ended, and how far it got
    process.stderr.write(`still waiting for job ${jobId} to end: ${job.status} after ${waited} s\n`);
  }
}
