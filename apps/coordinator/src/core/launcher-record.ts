import type { Launcher, LauncherStatus, PollResponse, RegisterLauncherRequest } from '@agentq/protocol';
import { iso } from './clock.js';
import type { JobRecord } from './job-record.js';

/** A parked `GET /launcher/jobs` request, resolved by the event that has work for it. */
export interface PollWaiter {
  readonly launcher: LauncherRecord;
  /** 0: only stop requests and deregistration may answer it */
  readonly capacity: number;
  readonly signal: AbortSignal;
  finish(answer: PollResponse | null): void;
}

export interface LauncherRecord {
  readonly id: string;
  readonly hostname: string | null;
  readonly projectDir: string | null;
  readonly executorType: string | null;
  readonly maxJobs: number | null;
  readonly version: string | null;
  readonly registeredAt: number;
  /** name of the token it registered with (null: auth off) */
  readonly createdBy: string | null;
  lastSeen: number;
  status: LauncherStatus;
  staleAt: number | null;
  /** jobs it holds: claimed, running or stopping */
  activeJobs: Set<JobRecord>;
  /** stopping jobs not yet told to it through a poll */
  pendingStops: Set<string>;
  waiters: Set<PollWaiter>;
}

export function toWireLauncher(l: LauncherRecord, now: number): Launcher {
  return {
    launcher_id: l.id,
    hostname: l.hostname,
    project_dir: l.projectDir,
    executor_type: l.executorType,
    max_jobs: l.maxJobs,
    version: l.version,
    registered_at: iso(l.registeredAt),
    last_heartbeat: iso(l.lastSeen),
    seconds_since_heartbeat: Math.max(0, Math.round(now - l.lastSeen) / 1000),
    status: l.status,
    active_jobs: [...l.activeJobs].map((j) => j.id),
    labels: {},
    project_roots: [],
    host_id: null,
    portable_sessions: false,
    created_by: l.createdBy,
  };
}

export function newLauncherRecord(
  id: string,
  req: RegisterLauncherRequest,
  now: number,
  createdBy: string | null = null,
): LauncherRecord {
  return {
    id,
    hostname: req.hostname ?? null,
    projectDir: req.project_dir ?? null,
    executorType: req.executor_type ?? null,
    maxJobs: req.max_jobs ?? null,
    version: req.version ?? null,
    registeredAt: now,
    createdBy,
    lastSeen: now,
    status: 'online',
    staleAt: null,
    activeJobs: new Set(),
    pendingStops: new Set(),
    waiters: new Set(),
  };
}

/**
 * The inverse of toWireLauncher, for a restore. `lastSeen` is now: a launcher gets a whole
 * heartbeat timeout to come back after the coordinator restarted.
 */
export function fromWireLauncher(w: Launcher, now: number): LauncherRecord {
  const launcher = newLauncherRecord(
    w.launcher_id,
    {
      hostname: w.hostname ?? undefined,
      project_dir: w.project_dir,
      executor_type: w.executor_type ?? undefined,
      max_jobs: w.max_jobs ?? undefined,
      version: w.version ?? undefined,
    },
    Date.parse(w.registered_at),
    w.created_by,
  );
  launcher.lastSeen = now;
  launcher.status = w.status;
  launcher.staleAt = w.status === 'stale' ? now : null;
  return launcher;
}
