import type { Store } from './store.js';

export const PostgresStore = {
  async open(_url: string, _o: unknown): Promise<Store> {
    throw new Error('PostgreSQL is not supported yet');
  },
};
