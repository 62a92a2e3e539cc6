import type { Statement } from 'better-sqlite3';

/*
 * Prompts live in their own table (`job_prompts`, schema version 4), not in the `jobs` row whose
 * `prompt` column stays ''. SQLite rewrites a row's whole record on every UPDATE, and a job's row
 * changes several times (claim, start, output size, end): with the prompt inside it, a job with a
 * 1 MiB prompt wrote about 1 MiB per change, synchronously, on the event loop. A prompt never
 * changes, so it is written once and read back where jobs are read.
 */

/** `SELECT` of whole job rows, prompt included: add `WHERE ...` on the jobs table's columns. */
export const SELECT_JOBS = 'SELECT jobs.*, job_prompts.prompt AS stored_prompt FROM jobs JOIN job_prompts ON job_prompts.job_id = jobs.id';

/** A raw row of SELECT_JOBS as a raw `jobs` row with its prompt. */
export function withPrompt(raw: Record<string, unknown>): Record<string, unknown> {
  const { stored_prompt, ...row } = raw;
  return { ...row, prompt: stored_prompt };
}

export interface PromptWrites {
  /** the prepared statement for `sql` (the store's cache) */
  stmt(sql: string): Statement;
}

export function insertPrompt(db: PromptWrites, jobId: string, prompt: string): void {
  db.stmt('INSERT OR REPLACE INTO job_prompts (job_id, prompt) VALUES (?, ?)').run(jobId, prompt);
}

export function deletePrompt(db: PromptWrites, jobId: string): void {
  db.stmt('DELETE FROM job_prompts WHERE job_id = ?').run(jobId);
}
