import { useEffect, useMemo, useState } from 'preact/hooks';

/**
 * Hash routes (`#/jobs/job_…`): the coordinator serves one page and never needs to know the
 * dashboard's paths, and a view is a link that can be shared.
 */
export type Route =
  | { name: 'jobs'; query: URLSearchParams }
  | { name: 'job'; id: string; query: URLSearchParams }
  | { name: 'sessions'; query: URLSearchParams }
  | { name: 'launchers'; query: URLSearchParams }
  | { name: 'start'; query: URLSearchParams }
  | { name: 'not-found'; path: string; query: URLSearchParams };

export function parseRoute(hash: string): Route {
  const raw = hash.replace(/^#/, '') || '/jobs';
  const q = raw.indexOf('?');
  const path = q < 0 ? raw : raw.slice(0, q);
  const query = new URLSearchParams(q < 0 ? '' : raw.slice(q + 1));
  const parts = decodeParts(path);
  if (parts === null) return { name: 'not-found', path, query };
  if (parts.length === 0 || (parts[0] === 'jobs' && parts.length === 1)) return { name: 'jobs', query };
  if (parts[0] === 'jobs' && parts.length === 2) return { name: 'job', id: parts[1]!, query };
  if (parts[0] === 'sessions' && parts.length === 1) return { name: 'sessions', query };
  if (parts[0] === 'launchers' && parts.length === 1) return { name: 'launchers', query };
  if (parts[0] === 'start' && parts.length === 1) return { name: 'start', query };
  return { name: 'not-found', path, query };
}

/**
 * The path's segments, decoded; null when one is not valid percent-encoding (`%E0%A4%A`): an
 * address typed or pasted by hand must not throw while the app renders.
 */
function decodeParts(path: string): string[] | null {
  try {
    return path.split('/').filter(Boolean).map(decodeURIComponent);
  } catch (err) {
    if (err instanceof URIError) return null;
    throw err;
  }
}

/** `href` of a dashboard path, e.g. link('/jobs', { session: 'x' }). */
export function link(path: string, query: Record<string, string | undefined> = {}): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(query)) if (v) q.set(k, v);
  const s = q.toString();
  return `#${path}${s ? `?${s}` : ''}`;
}

export const jobLink = (id: string) => link(`/jobs/${encodeURIComponent(id)}`);

export function navigate(href: string): void {
  location.hash = href.replace(/^#/, '');
}

export function useRoute(): Route {
  const [hash, setHash] = useState(location.hash);
  useEffect(() => {
    const on = () => setHash(location.hash);
    addEventListener('hashchange', on);
    // Effects run after the first paint: a hash changed between the first render and now (a
    // click or a script right after the page loaded) fired its event before anyone listened.
    on();
    return () => removeEventListener('hashchange', on);
  }, []);
  return useMemo(() => parseRoute(hash), [hash]);
}
