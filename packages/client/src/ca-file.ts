import { X509Certificate } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { toError } from './errors.js';

/** A PEM certificate block, as TLS reads a `ca` (OpenSSL's TRUSTED CERTIFICATE form too). */
const PEM_CERTIFICATE = /-----BEGIN (TRUSTED )?CERTIFICATE-----[^]*?-----END \1CERTIFICATE-----/g;

/**
 * Read a CA file (`--ca-file`, `AGENTQ_CA_FILE`, `caFile`) and check that it holds certificates.
 * Node's TLS skips without a word what in a `ca` is not a certificate: a key given by mistake,
 * the wrong file, a certificate cut short. The coordinator's certificate would then be refused as
 * "self-signed" at every call, which reads as a coordinator that is down; said here instead, once,
 * naming the file. Throws an Error that names the path.
 */
export function readCaFile(path: string): string {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    throw new Error(`cannot read the CA file ${path}: ${toError(err).message}`, { cause: err });
  }
  const blocks = text.match(PEM_CERTIFICATE) ?? [];
  if (blocks.length === 0) {
    const what = /-----BEGIN [A-Z ]*PRIVATE KEY-----/.test(text) ? ' (it holds a private key: give the certificate, never the key)' : '';
    throw new Error(`the CA file ${path} holds no PEM certificate ("-----BEGIN CERTIFICATE-----")${what}`);
  }
  blocks.forEach((block, i) => {
    try {
      new X509Certificate(block);
    } catch (err) {
      throw new Error(`the CA file ${path}: certificate ${i + 1} of ${blocks.length} cannot be read: ${toError(err).message}`, { cause: err });
    }
  });
  return text;
}
