/*
 * Request bodies hold Unicode text. JSON can spell a lone surrogate (`"\ud800"` without its pair),
 * which no UTF-8 store can hold: SQLite and PostgreSQL would give back U+FFFD in its place, so a
 * prompt read back from the database (after a restart, or from a list) would differ from the one
 * the create answered. Every string of a parsed body is made well formed at once instead (each lone
 * surrogate becomes U+FFFD), so every store keeps, and every answer shows, the same text.
 */

type WellFormedString = string & { isWellFormed(): boolean; toWellFormed(): string };

const fix = (s: string): string => ((s as WellFormedString).isWellFormed() ? s : (s as WellFormedString).toWellFormed());

/** `value` with every string (keys too) well formed; objects are changed in place. */
export function wellFormed(value: unknown): unknown {
  if (typeof value === 'string') return fix(value);
  if (value === null || typeof value !== 'object') return value;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) value[i] = wellFormed(value[i]);
    return value;
  }
  const o = value as Record<string, unknown>;
  for (const key of Object.keys(o)) {
    const fixedKey = fix(key);
    const v = wellFormed(o[key]);
    if (fixedKey !== key) {
      delete o[key];
      o[fixedKey] = v;
    } else if (v !== o[key]) o[key] = v;
  }
  return value;
}
