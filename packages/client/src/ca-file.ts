import { X509Certificate } from 'node:crypto';
import { closeSync, openSync, readSync } from 'node:fs';
import { toError } from './errors.js';

/**
 * The largest CA file read: the system bundle (/etc/ssl/certs/ca-certificates.crt) is some
 * 200 KiB, so more is the wrong file (a log, a disk image, /dev/zero), not one to read to its end
 * and parse certificate by certificate (TLS would parse it again at every connection).
 */
export const MAX_CA_FILE_BYTES = 4 * 1024 * 1024;

/** A PEM certificate's first line, as TLS reads a `ca`: OpenSSL's TRUSTED and old X509 forms too. */
const PEM_CERTIFICATE_BEGIN = /-----BEGIN ((?:TRUSTED |X509 )?CERTIFICATE)-----/g;

/**
 * The PEM certificate blocks of `text`, each from its BEGIN line to the END line of the same
 * label. Found with indexOf, in one pass: a lazy `BEGIN[^]*?END` regex scans to the end of the
 * text from every BEGIN that has no END after it, quadratic in a file of such lines.
 */
function certificateBlocks(text: string): string[] {
  const blocks: string[] = [];
  PEM_CERTIFICATE_BEGIN.lastIndex = 0;
  for (let m = PEM_CERTIFICATE_BEGIN.exec(text); m !== null; m = PEM_CERTIFICATE_BEGIN.exec(text)) {
    const endLine = `-----END ${m[1]}-----`;
    const end = text.indexOf(endLine, m.index + m[0].length);
    // cut short: no certificate of this label after it either
    if (end === -1) break;
    blocks.push(text.slice(m.index, end + endLine.length));
    PEM_CERTIFICATE_BEGIN.lastIndex = end + endLine.length;
  }
  return blocks;
}

/** The file's text, refused past MAX_CA_FILE_BYTES (read in chunks: a pipe or a device has no size). */
function readBounded(path: string): string {
  const fd = openSync(path, 'r');
  try {
    const chunks: Buffer[] = [];
    let total = 0;
    for (;;) {
      const chunk = Buffer.alloc(64 * 1024);
      const n = readSync(fd, chunk, 0, chunk.length, null);
      if (n === 0) break;
      total += n;
      if (total > MAX_CA_FILE_BYTES) throw new Error(`it is larger than ${MAX_CA_FILE_BYTES / 1024 / 1024} MiB: not a CA certificate file`);
      chunks.push(chunk.subarray(0, n));
    }
    return Buffer.concat(chunks).toString('utf8');
  } finally {
    closeSync(fd);
  }
}

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
    text = readBounded(path);
  } catch (err) {
    throw new Error(`cannot read the CA file ${path}: ${toError(err).message}`, { cause: err });
  }
  const blocks = certificateBlocks(text);
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
