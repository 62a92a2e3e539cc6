// Types of publish.mjs, for the tests that import it.
export declare const MANIFEST: string;
export declare function publish(
  out: string,
  build: { indexHtml: string; assets: ReadonlyMap<string, string | Uint8Array> },
  options?: { onStep?: (step: string) => Promise<void> | void },
): Promise<void>;
