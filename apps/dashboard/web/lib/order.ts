/** A row of a list the API pages in creation order: a job or a session. */
export interface Created {
  created_at: string;
  /** creation order (absent from a coordinator from before it, and from events it stored) */
  seq?: number | undefined;
}

/**
 * Oldest first: by `created_at`, then, for rows created at the same instant (a batch), by `seq`,
 * the creation order the API pages by, when both have one (a tie otherwise).
 */
export function byCreation(a: Created, b: Created): number {
  if (a.created_at !== b.created_at) return a.created_at < b.created_at ? -1 : 1;
  return a.seq !== undefined && b.seq !== undefined ? a.seq - b.seq : 0;
}
