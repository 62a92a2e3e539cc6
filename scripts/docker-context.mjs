// The build context and stages of the Dockerfile, read as Docker reads them, for the checks that
// stand in for a docker engine (scripts/docker-dry-run.mjs, apps/coordinator/test/docker-context.test.ts).
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

/**
 * Whether a path (relative to the context, `/`-separated) is left out: the last pattern that
 * matches it or a folder above it decides; `!` takes back in. Patterns are anchored at the
 * context's root; `*` and `?` stay within one path element, `**` spans any number. Not read as
 * Docker would: character classes (`[a-z]`), escapes (`\`), and `.` or `..` elements in a
 * pattern; none of them is in this project's .dockerignore.
 */
export function dockerignore(text) {
  const rules = text
    .split('\n')
    // a comment is a line that starts with # (not one indented)
    .filter((l) => !l.startsWith('#'))
    .map((l) => l.trim())
    .filter((l) => l !== '')
    .map((l) => {
      const keep = l.startsWith('!');
      const pattern = (keep ? l.slice(1).trim() : l).replace(/^\/+|\/+$/g, '');
      const source = pattern
        .split('/')
        .map((part) =>
          part === '**' ? '.*' : part.replace(/[.+^${}()|[\]\\]/g, '\\$&').replace(/\*/g, '[^/]*').replace(/\?/g, '[^/]'),
        )
        .join('/')
        .replace(/\.\*\//g, '(?:.*/)?');
      return { keep, re: new RegExp(`^${source}$`) };
    });
  return (path) => {
    const parts = path.split('/');
    let ignored = false;
    for (const { keep, re } of rules) {
      for (let n = 1; n <= parts.length; n++) {
        if (re.test(parts.slice(0, n).join('/'))) {
          ignored = !keep;
          break;
        }
      }
    }
    return ignored;
  };
}

/** The files of the build context of `root` (relative paths), as `docker build .` sends them. */
export function contextFiles(root) {
  const ignored = dockerignore(readFileSync(join(root, '.dockerignore'), 'utf8'));
  const files = [];
  const walk = (dir) => {
    for (const d of readdirSync(join(root, dir), { withFileTypes: true })) {
      const path = dir === '' ? d.name : `${dir}/${d.name}`;
      // nothing under these is ever sent (.dockerignore), and they are large
      if (d.isDirectory() && (d.name === 'node_modules' || d.name === '.git')) continue;
      if (d.isDirectory()) walk(path);
      else if (!ignored(path)) files.push(path);
    }
  };
  walk('');
  return files;
}

/**
 * The Dockerfile's stages: `{ name, instructions: [{ op, args }] }`, continuation lines joined,
 * comments dropped.
 */
export function dockerfileStages(text) {
  const stages = [];
  const lines = text.replace(/\\\n/g, ' ').split('\n').map((l) => l.trim());
  for (const line of lines) {
    if (line === '' || line.startsWith('#')) continue;
    const [, op, args] = /^(\w+)\s+(.*)$/.exec(line) ?? [];
    if (!op) continue;
    if (op.toUpperCase() === 'FROM') {
      const name = /\sAS\s+(\S+)/i.exec(args)?.[1] ?? String(stages.length);
      stages.push({ name, instructions: [] });
    } else if (stages.length > 0) stages.at(-1).instructions.push({ op: op.toUpperCase(), args });
  }
  return stages;
}
