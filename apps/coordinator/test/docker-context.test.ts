import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

// No docker engine runs here. `npm run docker:dry-run` (in .ci/run) carries the Dockerfile out
// natively, in a minute and a half; these are its quick checks, in the test suite: every file the
// Dockerfile copies from the build context is in that context as .dockerignore leaves it (a
// `COPY bench/package.json` with `bench` ignored broke `docker build`), and every script the image
// and docker-compose.yml run has its source in the tree.

const ROOT = fileURLToPath(new URL('../../../../', import.meta.url));

interface Stage {
  name: string;
  instructions: { op: string; args: string }[];
}
/** scripts/docker-context.mjs, shared with scripts/docker-dry-run.mjs */
const { dockerignore, contextFiles, dockerfileStages } = (await import(new URL('../../../../scripts/docker-context.mjs', import.meta.url).href)) as {
  dockerignore: (text: string) => (path: string) => boolean;
  contextFiles: (root: string) => string[];
  dockerfileStages: (text: string) => Stage[];
};

/** The sources of the Dockerfile's COPY instructions that read the build context (not `--from`). */
function copiedSources(dockerfile: string): string[] {
  return dockerfileStages(dockerfile)
    .flatMap((s) => s.instructions)
    .filter((i) => i.op === 'COPY' && !i.args.includes('--from='))
    .flatMap((i) => {
      const args = i.args.split(/\s+/).filter((a) => !a.startsWith('--'));
      return args.slice(0, -1).map((a) => a.replace(/^\.\/|\/$/g, ''));
    });
}

test('dockerignore: the last matching pattern decides, and a folder pattern covers what is under it', () => {
  const ignored = dockerignore('node_modules\n**/dist\nbench/*\n!bench/package.json\n# a comment\ndocs\n');
  assert.equal(ignored('node_modules/x/index.js'), true);
  assert.equal(ignored('apps/coordinator/dist/src/main.js'), true);
  assert.equal(ignored('dist/x.js'), true);
  assert.equal(ignored('bench/throughput.ts'), true);
  assert.equal(ignored('bench/package.json'), false);
  assert.equal(ignored('docs/api.md'), true);
  assert.equal(ignored('apps/coordinator/src/main.ts'), false);
  assert.equal(ignored('apps/docs/readme.md'), false);
});

test('every file the Dockerfile copies from the build context is in it, as .dockerignore leaves it', () => {
  const files = new Set(contextFiles(ROOT));
  const sources = copiedSources(readFileSync(join(ROOT, 'Dockerfile'), 'utf8'));
  assert.ok(sources.includes('package-lock.json') && sources.includes('apps'), `COPY sources read: ${sources.join(', ')}`);
  for (const source of sources) {
    const present = files.has(source) || [...files].some((f) => f.startsWith(`${source}/`));
    assert.ok(present, `COPY ${source}: not in the build context (.dockerignore leaves it out, or it does not exist)`);
  }
  // what the build does not need stays out of the context
  assert.ok(![...files].some((f) => f.startsWith('bench/') && f !== 'bench/package.json'));
});

test('the scripts the image and the compose files run are built from sources in the tree', () => {
  const texts = ['Dockerfile', 'docker-compose.yml', 'docker-compose.postgres.yml'].map((f) => readFileSync(join(ROOT, f), 'utf8')).join('\n');
  const scripts = new Set(texts.match(/apps\/[\w-]+\/dist\/src\/[\w/-]+\.js/g) ?? []);
  assert.ok(scripts.size >= 3, `scripts found: ${[...scripts].join(', ')}`);
  for (const script of scripts) {
    const source = script.replace('/dist/src/', '/src/').replace(/\.js$/, '.ts');
    assert.ok(existsSync(join(ROOT, source)), `${script}: no ${source}`);
  }
});
