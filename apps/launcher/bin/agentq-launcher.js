#!/usr/bin/env node
// Installed as a command by npm; the program itself is compiled TypeScript (`npm run build`).
import('../dist/src/main.js').catch((err) => {
  if (err?.code === 'ERR_MODULE_NOT_FOUND') {
    process.stderr.write('agentq is not built yet: run `npm run build` in the repository first\n');
    process.exit(1);
  }
  throw err;
});
