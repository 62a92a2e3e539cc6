import { realpathSync, statSync } from 'node:fs';
import { isAbsolute, resolve, sep } from 'node:path';

/**
 * Project roots (issue 9): the directories a launcher serves. A job runs in its `project_dir`
 * (default: the first root) only if that directory is one of the roots or inside one, compared
 * after resolving `..` and symlinks on this host: a symlink inside a root that points elsewhere
 * does not let a job out.
 */

/** Resolve the configured roots (relative to `cwd`) to real paths; throws naming a bad one. */
export function resolveProjectRoots(dirs: readonly string[], cwd: string): string[] {
  const roots: string[] = [];
  for (const dir of dirs.length ? dirs : ['.']) {
    const path = resolve(cwd, dir);
    let real: string;
    try {
      real = realpathSync(path);
    } catch {
      throw new Error(`${path} does not exist`);
    }
    if (!isDirectory(real)) throw new Error(`${path} is not a directory`);
    if (!roots.includes(real)) roots.push(real);
  }
  if (roots.length > 64) throw new Error(`at most 64 project directories, got ${roots.length}`);
  return roots;
}

/** Where a job runs, or why it may not run here. */
export type JobDir =
  | { ok: true; dir: string }
  | { ok: false; code: 'outside_project_roots' | 'project_dir_not_found'; error: string };

/**
 * Decide the directory a job runs in. A relative `project_dir` is taken relative to the first
 * root. The roots check comes before the existence check, so that a job cannot probe which
 * directories exist outside the roots.
 */
export function resolveJobDir(projectDir: string | null, roots: readonly string[]): JobDir {
  const requested = projectDir ?? roots[0]!;
  const lexical = isAbsolute(requested) ? resolve(requested) : resolve(roots[0]!, requested);
  let real: string | undefined;
  try {
    real = realpathSync(lexical);
  } catch {
    // does not exist (yet): judged by its path as written, `..` resolved
  }
  const judged = real ?? lexical;
  if (!roots.some((root) => isInside(judged, root))) {
    const via = real !== undefined && real !== lexical ? ` (it resolves to ${real})` : '';
    return {
      ok: false,
      code: 'outside_project_roots',
      error: `project_dir ${requested} is outside this launcher's project roots${via}; it serves ${roots.join(', ')}`,
    };
  }
  if (real === undefined || !isDirectory(real)) {
    return { ok: false, code: 'project_dir_not_found', error: `project_dir ${lexical} does not exist on this host` };
  }
  return { ok: true, dir: real };
}

function isInside(path: string, root: string): boolean {
  if (path === root) return true;
  return path.startsWith(root.endsWith(sep) ? root : root + sep);
}

function isDirectory(path: string): boolean {
  try {
    return statSync(path).isDirectory();
  } catch {
    return false;
  }
}
