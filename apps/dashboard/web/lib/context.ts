import { createContext } from 'preact';
import { useContext, useEffect, useRef, useState } from 'preact/hooks';
import type { Api } from './api.js';
import type { Batch, EventStream, StreamState } from './events.js';

/** The page's two services, passed down by context (no module-level singletons). */
export interface Services {
  api: Api;
  stream: EventStream;
}

export const ServicesContext = createContext<Services | null>(null);

export function useServices(): Services {
  const s = useContext(ServicesContext);
  if (s === null) throw new Error('useServices outside <ServicesContext.Provider>');
  return s;
}

/** Call `handler` with each batch of live events (at most one batch per animation frame). */
export function useEventBatches(handler: (batch: Batch) => void): void {
  const { stream } = useServices();
  const ref = useRef(handler);
  ref.current = handler;
  useEffect(() => stream.onBatch((b) => ref.current(b)), [stream]);
}

/** Call `handler` when events were lost (a gap in the stream): re-read what the view shows. */
export function useResync(handler: () => void): void {
  const { stream } = useServices();
  const ref = useRef(handler);
  ref.current = handler;
  useEffect(() => stream.onResync(() => ref.current()), [stream]);
}

export function useStreamState(): StreamState {
  const { stream } = useServices();
  const [state, setState] = useState(stream.state);
  useEffect(() => {
    setState(stream.state);
    return stream.onState(setState);
  }, [stream]);
  return state;
}

/** The current time, refreshed every `everyMs` (for "12 s ago" labels). */
export function useNow(everyMs: number): number {
  const [now, setNow] = useState(Date.now());
  useEffect(() => {
    const timer = setInterval(() => setNow(Date.now()), everyMs);
    return () => clearInterval(timer);
  }, [everyMs]);
  return now;
}
