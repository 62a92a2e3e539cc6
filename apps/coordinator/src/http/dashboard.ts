import { existsSync } from 'node:fs';
import { basename, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ErrorCodes, type ErrorBody, type ErrorCode } from '@agentq/protocol';
import fastifyStatic, { type SetHeadersResponse } from '@fastify/static';
import type { FastifyPluginAsync } from 'fastify';

/**
 * Where `npm run build` puts the dashboard (apps/dashboard/dist/public), found from this file:
 * apps/coordinator/dist/src/http/ -> apps/dashboard/dist/public/. The same layout holds in the
 * Docker image.
 */
export const DEFAULT_DASHBOARD_DIR = fileURLToPath(new URL('../../../../dashboard/dist/public/', import.meta.url));

/**
 * The page may load only what this server serves: no inline script, no CDN. Preact sets styles
 * through the CSSOM, which style-src does not restrict.
 */
const CSP = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

function setHeaders(res: SetHeadersResponse, path: string): void {
  if (basename(path) === 'index.html') {
    // the page names the hashed asset files of its build: always revalidate it
    res.setHeader('cache-control', 'no-cache');
    res.setHeader('content-security-policy', CSP);
    res.setHeader('x-content-type-options', 'nosniff');
    res.setHeader('referrer-policy', 'no-referrer');
  } else {
    // assets carry a content hash in their name (see apps/dashboard/build.mjs)
    res.setHeader('cache-control', 'public, max-age=31536000, immutable');
  }
}

/**
 * The live web dashboard at `/`: static files only (index.html and /assets/*), no server-side
 * rendering. Exact routes for the files that exist at start (no wildcard route), so every other
 * path still gets the API's JSON 404. Without a build, `/` answers 503 `dashboard_not_built`.
 */
export const dashboardRoutes: FastifyPluginAsync<{ dir: string }> = async (app, { dir }) => {
  if (!existsSync(join(dir, 'index.html'))) {
    app.log.warn({ dashboard_dir: dir }, 'dashboard not built: GET / answers 503 (run `npm run build`)');
    const code: ErrorCode = 'dashboard_not_built';
    const body: ErrorBody = {
      error: {
        code,
        message: 'the dashboard is not built: run `npm run build` in the agentq repository, then restart the coordinator',
        details: { dashboard_dir: dir },
      },
    };
    // no schema: this fallback is not part of the API document
    app.get('/', async (_req, reply) => reply.code(ErrorCodes[code]).send(body));
    return;
  }
  await app.register(fastifyStatic, {
    root: dir,
    prefix: '/',
    wildcard: false,
    index: ['index.html'],
    cacheControl: false,
    etag: true,
    lastModified: false,
    setHeaders,
  });
};
