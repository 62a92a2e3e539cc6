import { connect, type Socket } from 'node:net';
import type { TestContext } from 'node:test';
import { AgentqClient } from '@agentq/client';
import { request } from 'undici';
import { parsePrometheusText } from './prometheus-text.js';

/** Helpers of the limit tests (issue 11): raw sockets, metrics, clients that do not retry. */

/** A client that reports a 429/503 at once instead of honouring its Retry-After. */
export function noRetryClient(t: TestContext, url: string): AgentqClient {
  const client = new AgentqClient({ url, overloadRetries: 0 });
  t.after(() => client.close());
  return client;
}

/** One sample of `/metrics` (0 when absent). */
export async function metricValue(url: string, name: string, labels: Record<string, string> = {}): Promise<number> {
  const families = parsePrometheusText(await (await request(`${url}/metrics`)).body.text());
  const sample = families
    .get(name)
    ?.samples.find((s) => Object.keys(labels).length === Object.keys(s.labels).length && Object.entries(labels).every(([k, v]) => s.labels[k] === v));
  return sample?.value ?? 0;
}

/** Read `/metrics` until `name` has `value` (the server learns of a closed socket a moment after the client). */
export async function untilMetric(url: string, name: string, value: number, labels: Record<string, string> = {}): Promise<void> {
  while ((await metricValue(url, name, labels)) !== value) await new Promise((r) => setImmediate(r));
}

export interface RawStream {
  socket: Socket;
  text(): string;
}

/** A raw `GET /events` on its own socket: resolves once the response headers have arrived. */
export async function rawStream(t: TestContext, port: number, query = '', lastEventId?: number): Promise<RawStream> {
  const socket = connect(port, '127.0.0.1');
  t.after(() => socket.destroy());
  socket.on('error', () => undefined); // a reset is one way to be cut off
  let text = '';
  socket.setEncoding('utf8');
  socket.on('data', (chunk: string) => (text += chunk));
  const resume = lastEventId === undefined ? '' : `Last-Event-ID: ${lastEventId}\r\n`;
  socket.write(`GET /events${query} HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n${resume}\r\n`);
  const s = { socket, text: () => text };
  await seen(s, '\r\n\r\n');
  return s;
}

/** Resolve once the socket's text contains `needle`; reject if it closes first. */
export function seen(s: RawStream, needle: string): Promise<void> {
  if (s.text().includes(needle)) return Promise.resolve();
  return new Promise((resolve, reject) => {
    const check = () => {
      if (!s.text().includes(needle)) return;
      done();
      resolve();
    };
    const closed = () => {
      done();
      if (s.text().includes(needle)) resolve();
      else reject(new Error(`connection closed before ${JSON.stringify(needle)} arrived; got ${JSON.stringify(s.text().slice(0, 300))}`));
    };
    const done = () => {
      s.socket.off('data', check);
      s.socket.off('close', closed);
    };
    // after the collector registered in rawStream, so the text is up to date
    s.socket.on('data', check);
    s.socket.once('close', closed);
  });
}

/** A raw connection that sends `text` (if any) and collects what comes back. */
export function rawConnection(t: TestContext, port: number, text?: string): RawStream {
  const socket = connect(port, '127.0.0.1');
  t.after(() => socket.destroy());
  socket.on('error', () => undefined);
  let got = '';
  socket.setEncoding('utf8');
  socket.on('data', (chunk: string) => (got += chunk));
  if (text !== undefined) socket.write(text);
  return { socket, text: () => got };
}
