import { createHash, randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import type { Logger } from 'pino';
import selfsigned from 'selfsigned';
import { createLogger, loadConfig, MemoryLauncherCredentials, type LauncherCredentials } from '@agentq/coordinator';

/**
 * A self-signed certificate for 127.0.0.1 and localhost, made now, that is also its own CA
 * (pass the certificate file as the CA file).
 */
export async function makeCertificate(dir: string): Promise<{ certFile: string; keyFile: string }> {
  const pems = await selfsigned.generate([{ name: 'commonName', value: 'agentq test coordinator' }], {
    keyType: 'ec',
    algorithm: 'sha256',
    extensions: [
      { name: 'basicConstraints', cA: true },
      { name: 'keyUsage', digitalSignature: true, keyCertSign: true },
      { name: 'subjectAltName', altNames: [{ type: 2, value: 'localhost' }, { type: 7, ip: '127.0.0.1' }] },
    ],
  });
  const certFile = join(dir, 'coordinator.pem');
  const keyFile = join(dir, 'coordinator-key.pem');
  writeFileSync(certFile, pems.cert);
  writeFileSync(keyFile, pems.private, { mode: 0o600 });
  return { certFile, keyFile };
}

export type TokenRole = 'admin' | 'client' | 'reader' | 'launcher';

/** Random secrets for the given roles, a token file listing their hashes, and a file per secret. */
export function writeTokens(dir: string, roles: readonly TokenRole[]): { file: string; secrets: Record<string, string>; secretFile: (role: TokenRole) => string } {
  const secrets: Record<string, string> = {};
  const lines = ['# NAME ROLE SHA256HEX'];
  for (const role of roles) {
    const secret = randomBytes(32).toString('base64url');
    secrets[role] = secret;
    lines.push(`${role}-token ${role} ${createHash('sha256').update(secret).digest('hex')}`);
    writeFileSync(join(dir, `${role}.token`), `${secret}\n`, { mode: 0o600 });
  }
  const file = join(dir, 'tokens');
  writeFileSync(file, `${lines.join('\n')}\n`);
  return { file, secrets, secretFile: (role) => join(dir, `${role}.token`) };
}

/** Launcher credentials that also remember every token they issued (to look for them in logs). */
export class RecordingCredentials extends MemoryLauncherCredentials implements LauncherCredentials {
  readonly issued: string[] = [];
  override async issue(launcherId: string, registeredBy: string | null): Promise<string> {
    const token = await super.issue(launcherId, registeredBy);
    this.issued.push(token);
    return token;
  }
}

/** The coordinator's own logger, at `trace`, keeping every line it writes. */
export function recordingLogger(): { log: Logger; lines: string[] } {
  const lines: string[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _enc, done) {
      lines.push(...chunk.toString('utf8').split('\n').filter(Boolean));
      done();
    },
  });
  return { log: createLogger(loadConfig({}, { logLevel: 'trace' }), stream), lines };
}
