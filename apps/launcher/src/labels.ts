import { Value } from '@sinclair/typebox/value';
import { LABEL_KEY_RULE, LabelKey, LabelValue, type Labels } from '@agentq/protocol';

/**
 * Launcher labels (issue 9): what a job's `requires` is matched against. Every launcher has the
 * built-in `hostname`, `executor`, `os` and `arch`; `--label key=value` adds more and may
 * override a built-in (e.g. `--label executor=my-agent` for a custom executor whose path is long).
 */
export function builtinLabels(o: { hostname: string; executor: string }): Labels {
  return { hostname: o.hostname, executor: o.executor, os: process.platform, arch: process.arch };
}

/**
 * Parse `key=value` items (from repeated `--label` flags or the comma-separated AGENTQ_LABELS).
 * Throws an Error naming the bad item; keys and values follow the protocol's Labels schema.
 */
export function parseLabels(items: readonly string[]): Labels {
  const labels: Labels = {};
  for (const item of items) {
    const eq = item.indexOf('=');
    if (eq <= 0) throw new Error(`expected key=value, got ${JSON.stringify(item)}`);
    const key = item.slice(0, eq).trim();
    const value = item.slice(eq + 1).trim();
    if (!Value.Check(LabelKey, key)) {
      throw new Error(`label key ${JSON.stringify(key)} ${LABEL_KEY_RULE}`);
    }
    if (!Value.Check(LabelValue, value)) {
      throw new Error(`label ${key}: the value must be 1 to 128 characters without control characters`);
    }
    labels[key] = value;
  }
  return labels;
}

/** Check a finished label set against the protocol's limits (a built-in value may be too long). */
export function checkLabels(labels: Labels): void {
  const keys = Object.keys(labels);
  if (keys.length > 32) throw new Error(`at most 32 labels (built-ins included), got ${keys.length}`);
  for (const [key, value] of Object.entries(labels)) {
    if (!Value.Check(LabelValue, value)) {
      throw new Error(
        `the built-in label ${key}=${JSON.stringify(value)} is not a valid label value (1 to 128 characters); set it with --label ${key}=VALUE`,
      );
    }
  }
}
