import { isIP } from 'node:net';
import { ConfigError, type CoordinatorConfig } from './config.js';

/** Whether `host` is a loopback address (or `localhost`): only this machine can connect. */
export function isLoopback(host: string): boolean {
  const h = host.replace(/^\[|\]$/g, '').toLowerCase();
  if (h === 'localhost') return true;
  if (isIP(h) === 4) return h.startsWith('127.');
  if (isIP(h) === 6) return h === '::1' || /^(0{0,4}:){7}0{0,3}1$/.test(h) || h === '::ffff:127.0.0.1' || h.startsWith('::ffff:127.');
  return false;
}

/**
 * No weak default: without tokens the coordinator runs open only on loopback (the embedded
 * `npm start` stays zero-config). Anywhere else anyone who reaches the port could run any prompt
 * on every launcher host, so it refuses to start unless AUTH_DISABLED=true says that is meant.
 */
export function checkExposure(config: CoordinatorConfig): void {
  if (config.authTokensFile !== null || config.authDisabled || isLoopback(config.host)) return;
  throw new ConfigError(
    'AUTH_TOKENS_FILE',
    `is not set, and HOST=${config.host} is not a loopback address: refusing to serve every launcher to ` +
      'anyone who can reach the port. Set AUTH_TOKENS_FILE to a token file (see docs/operations.md), ' +
      'listen on 127.0.0.1, or set AUTH_DISABLED=true to run without authentication on purpose',
  );
}
