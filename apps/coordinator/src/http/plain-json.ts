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
  serializerCompiler: () => (data: unknown) => JSON.stringify(data),
};
