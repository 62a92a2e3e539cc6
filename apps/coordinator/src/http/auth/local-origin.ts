import { isLoopback } from '../../exposure.js';

/*
 * Without tokens the coordinator is open to whatever reaches its loopback port, and a web page
 * in a browser on the same machine can reach it: by DNS rebinding (its own name made to point at
 * 127.0.0.1, so the browser sends `Host: <that name>`) or by a plain cross-site request (a form or
 * a bodyless POST, which the browser sends without asking first, with `Origin: <the page>`). A
 * request the coordinator answers must therefore name a loopback host, and come from no origin
 * (curl, the CLI, launchers) or from a page on loopback (the dashboard it serves itself).
 */

/** The host of a Host header (`name`, `name:port`, `[v6]:port`), lower-cased. */
function hostOf(header: string): string {
  const h = header.trim().toLowerCase();
  if (h.startsWith('[')) return h.slice(0, h.indexOf(']') + 1);
  const colon = h.lastIndexOf(':');
  return colon > 0 && h.indexOf(':') === colon ? h.slice(0, colon) : h;
}

/**
 * The host a request is for, as a Host header writes it. A request line may carry an absolute-form
 * target (`GET http://name:port/path HTTP/1.1`, what clients send to a proxy, and what Node's
 * server and Fastify's router take from anyone, routing it by its path): RFC 9112 §3.2.2 has the
 * server then ignore Host and use the target's authority, so a loopback Host cannot vouch for a
 * request whose target names another host. Origin-form (`/path`) and `*` leave it to Host.
 */
export function targetHost(url: string, host: string | undefined): string | undefined {
  if (url.charCodeAt(0) === 47 /* / */) return host;
  const authority = ABSOLUTE_FORM.exec(url)?.[1];
  if (authority === undefined) return host;
  // userinfo (`user@host`) is no part of the host
  return authority.slice(authority.lastIndexOf('@') + 1);
}

/** `scheme://authority` at the start of an absolute URI (RFC 3986 §3): the authority ends at `/`, `?` or `#`. */
const ABSOLUTE_FORM = /^[A-Za-z][A-Za-z0-9+.-]*:\/\/([^/?#]*)/;

/** What makes a request foreign (for the error), or undefined when it is a local one. */
export function foreignTo(host: string | undefined, origin: string | undefined): string | undefined {
  return foreignHost(host) ?? (origin === undefined ? undefined : foreignOrigin(origin));
}

/**
 * foreignTo, remembering the last Host header it found local: a client names the same host in
 * every request, and reading it (hostOf, then isLoopback's tests) was most of what the check cost
 * per request. The origin, when there is one, is checked every time.
 */
export function localRequestCheck(): (host: string | undefined, origin: string | undefined) => string | undefined {
  // no Host (HTTP/1.0) is local too: the first value is right
  let localHost: string | undefined;
  return (host, origin) => {
    if (host !== localHost) {
      const refused = foreignHost(host);
      if (refused !== undefined) return refused;
      localHost = host;
    }
    return origin === undefined ? undefined : foreignOrigin(origin);
  };
}

function foreignHost(host: string | undefined): string | undefined {
  // HTTP/1.0 without Host: not a browser (browsers always send it)
  if (host !== undefined && !isLoopback(hostOf(host))) return `a request for host ${JSON.stringify(host)} is refused`;
  return undefined;
}

function foreignOrigin(origin: string): string | undefined {
  let originHost: string;
  try {
    originHost = new URL(origin).hostname;
  } catch {
    // `Origin: null` (a sandboxed frame, a file) included: no page that can be trusted
    return `a request from origin ${JSON.stringify(origin)} is refused`;
  }
  return isLoopback(originHost) ? undefined : `a request from origin ${JSON.stringify(origin)} is refused`;
}
