import type { FastifyInstance, FastifyPluginAsync, RouteOptions } from 'fastify';
import { accessOf } from './auth/route-access.js';

interface RouteDoc {
  method: string;
  url: string;
  schema: Record<string, unknown>;
}

/** Record every route's schemas as it is added (call before registering the routes). */
export function collectRoutes(app: FastifyInstance): RouteDoc[] {
  const routes: RouteDoc[] = [];
  app.addHook('onRoute', (route: RouteOptions) => {
    if (!route.schema) return;
    for (const method of [route.method].flat()) {
      if (method === 'HEAD') continue;
      routes.push({ method: method.toLowerCase(), url: route.url, schema: route.schema as Record<string, unknown> });
    }
  });
  return routes;
}

/** TypeBox schemas are JSON Schema; strip TypeBox's symbol keys by a JSON round trip. */
const plain = (s: unknown) => JSON.parse(JSON.stringify(s)) as Record<string, unknown>;

function parameters(schema: unknown, where: 'path' | 'query') {
  const s = schema ? plain(schema) : undefined;
  const props = (s?.properties ?? {}) as Record<string, Record<string, unknown>>;
  const required = new Set((s?.required as string[] | undefined) ?? []);
  return Object.entries(props).map(([name, p]) => ({
    name,
    in: where,
    required: where === 'path' || required.has(name),
    description: p.description,
    schema: p,
  }));
}

/** Build an OpenAPI 3.1 document from the routes' schemas: the same schemas that validate. */
export function buildOpenApi(routes: RouteDoc[]) {
  const paths: Record<string, Record<string, unknown>> = {};
  for (const r of routes) {
    const path = r.url.replace(/:([A-Za-z_]+)/g, '{$1}');
    const responses: Record<string, unknown> = {};
    for (const [code, schema] of Object.entries((r.schema.response ?? {}) as Record<string, unknown>)) {
      responses[code] =
        code === '204'
          ? { description: 'No Content' }
          : { description: code.startsWith('2') ? 'OK' : 'Error', content: { 'application/json': { schema: plain(schema) } } };
    }
    const access = accessOf(r.method.toUpperCase(), r.url);
    paths[path] ??= {};
    paths[path][r.method] = {
      // who may call it (when the coordinator has tokens): see docs/operations.md
      security: access?.public ? [] : [{ bearer: [] }],
      'x-agentq-roles': access?.public ? 'public' : [...(access?.roles ?? []), ...(access?.launcher ? ['launcher credential'] : [])],
      parameters: [...parameters(r.schema.params, 'path'), ...parameters(r.schema.querystring, 'query')],
      ...(r.schema.body ? { requestBody: { content: { 'application/json': { schema: plain(r.schema.body) } } } } : {}),
      responses,
    };
  }
  return {
    openapi: '3.1.0',
    info: { title: 'agentq coordinator', version: '0.1.0' },
    components: { securitySchemes: { bearer: { type: 'http', scheme: 'bearer', description: 'a token from AUTH_TOKENS_FILE, or a launcher_token' } } },
    paths,
  };
}

export const openapiRoutes: FastifyPluginAsync<{ routes: RouteDoc[] }> = async (app, { routes }) => {
  app.get('/openapi.json', async () => buildOpenApi(routes));
};
