// Types of publish.mjs, for the tests that import it.
export declare const MANIFEST: string;
export declare function publish(
  out: string,
  build: { indexHtml: string; assets: ReadonlyMap<string, string | Uint8Array> },
  options?: {
    onStep?: (step: string) => Promise<void> | void;
    onWait?: (holder: { pid: number; hostname: string }) => void;
    lockTimeoutMs?: number;
  },
): Promise<void>;
export declare const LOCK: string;
