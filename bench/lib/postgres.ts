/**
 * A fresh PostgreSQL schema for a benchmark: BENCH_PG_URL's server, or a throwaway one started
 * like the tests' (the coordinator's test helper: Debian's postgresql package, fsync off, as a
 * disposable server).
 */
export async function postgresUrl(): Promise<string> {
  const helper = (await import(new URL('../../../apps/coordinator/dist/test/pg-server.js', import.meta.url).href)) as {
    freshDatabaseUrl(t: unknown): Promise<string | null>;
  };
  if (process.env.BENCH_PG_URL) process.env.AGENTQ_TEST_PG_URL = process.env.BENCH_PG_URL;
  const url = await helper.freshDatabaseUrl({
    skip: (why: string) => {
      throw new Error(why);
    },
  });
  if (!url) throw new Error('no PostgreSQL server');
  return url;
}
