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
 * rendering. Every other path still gets the API's JSON 404. While there is no build, `/` and
 * `/index.html` answer 503 `dashboard_not_built`.
 *
 * Files are looked up when asked for, not listed once at start: `npm run build` while the
 * coordinator runs writes an index.html naming new hashed assets, and routes made at start for
 * the old names only answered 404 for them, leaving a blank page on the next load until a restart.
 * For the same reason whether there is a build at all is asked at each request: a coordinator
 * started before the first `npm run build` serves the dashboard as soon as it is built.
 */
export const dashboardRoutes: FastifyPluginAsync<{ dir: string }> = async (app, { dir }) => {
  const index = join(dir, 'index.html');
  if (!existsSync(index)) {
    app.log.warn({ dashboard_dir: dir }, 'dashboard not built: GET / answers 503 until `npm run build` writes it');
  }
  const code: ErrorCode = 'dashboard_not_built';
  const notBuilt: ErrorBody = {
    error: {
      code,
      message: 'the dashboard is not built: run `npm run build` in the agentq repository: this coordinator serves it as soon as it is built',
      details: { dashboard_dir: dir },
    },
  };
  // reply.sendFile only, each call naming its folder: the routes below say which files may be
  // asked for. No `root`: it is checked once at start, and `dir` may not exist yet.
  await app.register(fastifyStatic, {
    serve: false,
    index: false,
    cacheControl: false,
    etag: true,
    lastModified: false,
    setHeaders,
  });
  // read at each request: it names the assets of the build there is now
  const page: RouteHandlerMethod = (_req, reply) =>
    existsSync(index) ? reply.sendFile('index.html', dir) : reply.code(ErrorCodes[code]).send(notBuilt);
  // not part of the API document; served while the overload protection refuses the API (see
  // overload.ts): a refused page would stay a JSON error, a served one retries its reads itself
  const hide = { schema: { hide: true }, config: { servedWhenOverloaded: true } };
  app.get('/', hide, page);
  app.get('/index.html', hide, page);
  // a file of assets/ by its plain name (the build writes no folders there); any other name, or
  // one that is not there (an older build's), is the API's JSON 404 like every unknown path
  const assets = join(dir, 'assets');
  app.get<{ Params: { file: string } }>('/assets/:file', hide, (req, reply) =>
    ASSET_NAME.test(req.params.file) ? reply.sendFile(req.params.file, assets) : reply.callNotFound(),
  );
};

/**
 * What esbuild writes in assets/: `app-<hash>.js`, `.css`, their `.map`, `.LEGAL.txt`. Not a
 * leading dot: the build's files being written (apps/dashboard/publish.mjs) are never served.
 */
const ASSET_NAME = /^[A-Za-z0-9_-][A-Za-z0-9._-]*$/;
