import { jsonBytes } from '../json-bytes.js';

/**
 * Route option: answers are serialised with JSON.stringify instead of the serializer Fastify
 * compiles from the response schema (fast-json-stringify). The schema stays, for validation of
 * requests and for the OpenAPI document.
 *
 * Why: the wire objects (Job above all) have many nullable fields, `anyOf [X, null]` in JSON
 * Schema, and the compiled serializer checks each of them against its schemas at run time; on
 * the launcher protocol and job-creation routes that made serialisation several times slower
 * than JSON.stringify (docs/benchmarks.md). It adds nothing on the routes that use this
 * (launcher protocol, creates, job reads, lists and waits): their answers are built by the
 * core's wire functions (core/wire.ts), exactly in the schema's shape.
 */
export const plainJson: { serializerCompiler: () => (data: unknown) => string } = {
  // Bytes, not text (json-bytes.ts): Fastify measures a text answer (Buffer.byteLength) for its
  // Content-Length and the socket encodes it again when writing, while a Buffer is encoded once and
  // its length is known; and a large prompt or result in it is encoded once for all its answers.
  serializerCompiler: () => (data: unknown) => jsonBytes(data) as unknown as string,
};
