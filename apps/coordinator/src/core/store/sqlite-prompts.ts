/*
 * Prompts live in their own table (`job_prompts`, schema version 4), not in the `jobs` row whose
 * `prompt` column stays ''. SQLite rewrites a row's whole record on every UPDATE, and a job's row
 * changes several times (claim, start, output size, end): with the prompt inside it, a job with a
 * 1 MiB prompt wrote about 1 MiB per change, synchronously, on the event loop. A prompt never
 * changes, so it is written once and read back where jobs are read.
 */

/** `SELECT` of whole job rows, prompt included: add `WHERE ...` on the jobs table's columns. */
export const SELECT_JOBS = 'SELECT jobs.*, job_prompts.prompt AS stored_prompt FROM jobs JOIN job_prompts ON job_prompts.job_id = jobs.id';

/** A raw row of SELECT_JOBS (a fresh object) as a raw `jobs` row with its prompt; decode reads only the table's columns. */
export function withPrompt(raw: Record<string, unknown>): Record<string, unknown> {
  raw['prompt'] = raw['stored_prompt'];
  return raw;
}

/** A job's prompt, written once (a replace only if a patch ever carried one). */
export const PUT_PROMPT = 'INSERT OR REPLACE INTO job_prompts (job_id, prompt) VALUES (?, ?)';
export const DELETE_PROMPT = 'DELETE FROM job_prompts WHERE job_id = ?';
