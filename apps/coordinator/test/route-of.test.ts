import assert from 'node:assert/strict';
import { test } from 'node:test';
import Fastify, { type FastifyRequest } from 'fastify';
import { localRequestCheck, foreignTo } from '../src/http/auth/local-origin.js';
import { installRouteOf, routeOf } from '../src/http/route-of.js';

/*
 * Two per-request shortcuts of the HTTP layer, each against what it replaces: routeOf (the route
 * options read once per request) against Fastify's `request.routeOptions`, and the local-request
 * check that remembers a local Host against foreignTo.
 */

/** What of the route options the coordinator reads, to compare (the getter makes a new object each time). */
const seen = (o: FastifyRequest['routeOptions']) => ({ url: o.url, method: o.method, bodyLimit: o.bodyLimit, config: o.config });

test('routeOf answers what request.routeOptions answers, at every stage, after a move to the 404 handler too', async (t) => {
  const app = Fastify({ bodyLimit: 1000 });
  t.after(() => app.close());
  installRouteOf(app);
  const mismatches: string[] = [];
  const compare = (stage: string) => (req: FastifyRequest, _reply: unknown, done: () => void) => {
    try {
      assert.deepEqual(seen(routeOf(req)), seen(req.routeOptions));
    } catch (err) {
      mismatches.push(`${req.method} ${req.url} at ${stage}: ${(err as Error).message}`);
    }
    done();
  };
  app.addHook('onRequest', compare('onRequest'));
  app.addHook('preHandler', compare('preHandler'));
  app.addHook('onResponse', compare('onResponse'));
  app.post('/jobs/:job_id', { bodyLimit: 10 }, async () => ({ ok: true }));
  // a route that hands the request to the 404 handler, as @fastify/static does for a missing file
  app.get('/files/*', async (req, reply) => {
    assert.equal(routeOf(req).url, '/files/*');
    return reply.callNotFound();
  });
  app.setNotFoundHandler(async (req, reply) => {
    assert.equal(routeOf(req).url, undefined);
    return reply.code(404).send({ route: routeOf(req).url ?? null });
  });

  assert.equal((await app.inject({ method: 'POST', url: '/jobs/j1', payload: {} })).statusCode, 200);
  assert.equal((await app.inject({ method: 'GET', url: '/nothing' })).statusCode, 404);
  const moved = await app.inject({ method: 'GET', url: '/files/missing.js' });
  assert.equal(moved.statusCode, 404);
  assert.deepEqual(moved.json(), { route: null });
  assert.deepEqual(mismatches, []);
});

test('routeOf works on a request of an app that did not install it (the getter, then kept)', async (t) => {
  const app = Fastify();
  t.after(() => app.close());
  app.get('/x/:id', async (req) => ({ first: routeOf(req).url, again: routeOf(req).url, same: routeOf(req) === routeOf(req) }));
  assert.deepEqual((await app.inject('/x/1')).json(), { first: '/x/:id', again: '/x/:id', same: true });
});

test('the local-request check that remembers a local Host refuses and lets through exactly what foreignTo does', () => {
  const hosts = [undefined, '127.0.0.1:4000', 'localhost', 'LOCALHOST:1', '[::1]:80', 'evil.example', 'evil.example:4000', '127.0.0.1.nip.io', '10.0.0.1'];
  const origins = [undefined, 'http://127.0.0.1:4000', 'http://localhost', 'null', 'https://evil.example', 'not a url'];
  const pairs = hosts.flatMap((h) => origins.map((o) => [h, o] as const));
  const check = localRequestCheck();
  // every pair after every other, so that each remembered host is tried against the next request
  for (const [h1, o1] of pairs) {
    for (const [h2, o2] of [[h1, o1] as const, ...pairs]) {
      assert.equal(check(h2, o2), foreignTo(h2, o2), `${String(h2)} / ${String(o2)} after ${String(h1)} / ${String(o1)}`);
    }
  }
});
