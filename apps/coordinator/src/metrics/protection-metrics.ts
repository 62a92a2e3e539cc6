import { Counter, Gauge, type Registry } from 'prom-client';

/** What the limits of docs/operations.md ("Limits and timeouts") have done, read at scrape time. */
export interface ProtectionSource {
  /** log lines dropped because stdout did not drain */
  logLinesDropped(): number;
  /**
   * UTF-8 bytes of pending prompts and of the messages and child outcomes sessions hold, which
   * MAX_QUEUED_BYTES bounds together; absent for a store that does not count them (PostgreSQL):
   * their gauges are not exported then, rather than a 0 that says the queue holds nothing
   */
  queuedBytes?: { prompts(): number; messages(): number; outcomes(): number };
  maxQueuedBytes: number;
  /** job creations and messages refused with queue_full */
  queueFullRefusals(): number;
  /** text of the list pages and wait answers in flight, its limit (MAX_ANSWER_BYTES_IN_FLIGHT), and answers that got no room */
  answers(): { held: number; max: number; refused: number };
  /** open TCP connections; refused and evicted ones; requests refused on reserved-only connections */
  connections(): { open: number; refused: number; evicted: number; requestsRefused: number };
  /** event streams refused (MAX_SSE_CLIENTS) and cut for not reading */
  sse(): { refused: number; cutUnread: number; cutTotal: number };
}

/**
 * The protection metrics. The counts are kept where the refusals happen and exported as they
 * stand at each scrape (reset, then set), like the gauges.
 */
export function registerProtectionMetrics(registry: Registry, source: ProtectionSource): void {
  const registers = [registry];
  new Counter({
    name: 'agentq_log_lines_dropped_total',
    help: 'Log lines dropped because the log destination (stdout) did not take them in time.',
    registers,
    collect() {
      this.reset();
      this.inc(source.logLinesDropped());
    },
  });
  const queued = source.queuedBytes;
  if (queued) {
    new Gauge({
      name: 'agentq_queued_prompt_bytes',
      help: 'UTF-8 bytes of the prompts of pending jobs (job creation is refused past MAX_QUEUED_BYTES).',
      registers,
      collect() {
        this.set(queued.prompts());
      },
    });
    new Gauge({
      name: 'agentq_queued_message_bytes',
      help: 'UTF-8 bytes of the messages sessions hold for their next turn (with agentq_queued_prompt_bytes, under MAX_QUEUED_BYTES).',
      registers,
      collect() {
        this.set(queued.messages());
      },
    });
    new Gauge({
      name: 'agentq_queued_outcome_bytes',
      help: 'UTF-8 bytes of the results and errors of child outcomes sessions hold for a delivery (with agentq_queued_prompt_bytes, under MAX_QUEUED_BYTES).',
      registers,
      collect() {
        this.set(queued.outcomes());
      },
    });
  }
  new Gauge({
    name: 'agentq_max_queued_prompt_bytes',
    help: 'MAX_QUEUED_BYTES: the limit on agentq_queued_prompt_bytes, agentq_queued_message_bytes and agentq_queued_outcome_bytes together.',
    registers,
    collect() {
      this.set(source.maxQueuedBytes);
    },
  });
  new Gauge({
    name: 'agentq_answer_bytes_in_flight',
    help: 'Characters of prompts, results and errors that list pages and wait answers being built or sent carry (pages shrink past MAX_ANSWER_BYTES_IN_FLIGHT).',
    registers,
    collect() {
      this.set(source.answers().held);
    },
  });
  new Gauge({
    name: 'agentq_max_answer_bytes_in_flight',
    help: 'MAX_ANSWER_BYTES_IN_FLIGHT: the limit on agentq_answer_bytes_in_flight.',
    registers,
    collect() {
      this.set(source.answers().max);
    },
  });
  new Counter({
    name: 'agentq_requests_refused_total',
    help: 'Requests refused by a limit: queue_full (MAX_QUEUED_BYTES), sse_clients (MAX_SSE_CLIENTS), connections (a connection past MAX_CONNECTIONS), answers_in_flight (a list page or wait answer with no room left in MAX_ANSWER_BYTES_IN_FLIGHT: 503, or every job omitted).',
    labelNames: ['reason'],
    registers,
    collect() {
      const c = source.connections();
      this.reset();
      this.inc({ reason: 'queue_full' }, source.queueFullRefusals());
      this.inc({ reason: 'sse_clients' }, source.sse().refused);
      this.inc({ reason: 'connections' }, c.requestsRefused);
      this.inc({ reason: 'answers_in_flight' }, source.answers().refused);
    },
  });
  new Gauge({
    name: 'agentq_connections',
    help: 'Open TCP connections.',
    registers,
    collect() {
      this.set(source.connections().open);
    },
  });
  new Counter({
    name: 'agentq_connections_closed_by_limit_total',
    help: 'Connections closed by the connection limits: refused at once, or evicted (idle) to make room.',
    labelNames: ['reason'],
    registers,
    collect() {
      const c = source.connections();
      this.reset();
      this.inc({ reason: 'refused' }, c.refused);
      this.inc({ reason: 'evicted' }, c.evicted);
    },
  });
  new Counter({
    name: 'agentq_sse_clients_cut_total',
    help: 'Event streams cut because the client did not read: its own unread bytes, or the total across streams.',
    labelNames: ['reason'],
    registers,
    collect() {
      const s = source.sse();
      this.reset();
      this.inc({ reason: 'client_unread' }, s.cutUnread);
      this.inc({ reason: 'total_buffered' }, s.cutTotal);
    },
  });
}
