import { existsSync } from 'node:fs';
import { basename, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ErrorCodes, type ErrorBody, type ErrorCode } from '@agentq/protocol';
import fastifyStatic, { type SetHeadersResponse } from '@fastify/static';
import type { FastifyPluginAsync, RouteHandlerMethod } from 'fastify';

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
 * rendering. Every other path still gets the API's JSON 404. Without a build, `/` answers 503
 * `dashboard_not_built`.
 *
 * Files are looked up when asked for, not listed once at start: `npm run build` while the
 * coordinator runs writes an index.html naming new hashed assets, and routes made at start for
 * the old names only answered 404 for them, leaving a blank page on the next load until a restart.
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
  // reply.sendFile only: the routes below say which files may be asked for
  await app.register(fastifyStatic, {
    root: dir,
    serve: false,
    index: false,
    cacheControl: false,
    etag: true,
    lastModified: false,
    setHeaders,
  });
  // read at each request: it names the assets of the build there is now
  const page: RouteHandlerMethod = (_req, reply) => reply.sendFile('index.html', dir);
  // not part of the API document
  const hide = { schema: { hide: true } };
  app.get('/', hide, page);
  app.get('/index.html', hide, page);
  // a file of assets/ by its plain name (the build writes no folders there); any other name, or
  // one that is not there (an older build's), is the API's JSON 404 like every unknown path
  const assets = join(dir, 'assets');
  app.get<{ Params: { file: string } }>('/assets/:file', hide, (req, reply) =>
    ASSET_NAME.test(req.params.file) ? reply.sendFile(req.params.file, assets) : reply.callNotFound(),
  );
};

/** What esbuild writes in assets/: `app-<hash>.js`, `.css`, their `.map`, `.LEGAL.txt`. */
const ASSET_NAME = /^[A-Za-z0-9_-][A-Za-z0-9._-]*$/;
