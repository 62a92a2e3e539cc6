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

/**
 * The TLS failures under a connection error that are not a coordinator that is down: a
 * certificate this machine does not trust (self-signed without a CA file, another CA, expired, a
 * host name it does not name), and an https:// URL for a coordinator that serves plain HTTP.
 */
const UNTRUSTED_CERTIFICATE =
  /^(DEPTH_ZERO_SELF_SIGNED_CERT|SELF_SIGNED_CERT_IN_CHAIN|UNABLE_TO_GET_ISSUER_CERT(_LOCALLY)?|UNABLE_TO_VERIFY_LEAF_SIGNATURE|CERT_[A-Z_]+|ERR_TLS_CERT_ALTNAME_INVALID)$/;
/** OpenSSL's code when the other side does not answer in TLS (an https:// URL for a plain-HTTP server). */
export const NOT_TLS = 'ERR_SSL_WRONG_VERSION_NUMBER';

/** The code of such a TLS failure in `err`'s cause chain (a connection error's), else undefined. */
export function tlsRefusalOf(err: unknown): string | undefined {
  for (let e = err, depth = 0; e instanceof Error && depth < 8; e = e.cause, depth++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string' && (UNTRUSTED_CERTIFICATE.test(code) || code === NOT_TLS)) return code;
  }
  return undefined;
}
