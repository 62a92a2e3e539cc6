import stringWidth from 'string-width';

/*
 * Text tables for people. Widths are display columns (`string-width`: a CJK character or an
 * emoji takes two, a combining mark none), not UTF-16 code units, so columns line up whatever
 * the session names are made of.
 */

const segmenter = new Intl.Segmenter(undefined, { granularity: 'grapheme' });

/**
 * Characters that are not to reach a terminal as they are. C0 but tab and line feed, DEL, C1: a
 * terminal acts on them. Bidirectional controls (embeddings, overrides, isolates, the marks):
 * they reorder what follows them on the line, so `report\u202egnp.exe` reads as `reportexe.png`.
 * Line and paragraph separators: some terminals and viewers break the line there.
 */
const CONTROL = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g;
/** The same, and tab and line feed: text that must stay on one line (a name, an id, one field). */
const LINE_CONTROL = /[\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g;

/** One character as it is shown: `\n`, `\t`, `\xNN` up to U+00FF, `\uNNNN` beyond. */
function shown(c: string): string {
  if (c === '\n') return '\\n';
  if (c === '\t') return '\\t';
  const code = c.charCodeAt(0);
  return code <= 0xff ? `\\x${code.toString(16).padStart(2, '0')}` : `\\u${code.toString(16).padStart(4, '0')}`;
}

/**
 * Text from the coordinator made safe for a terminal: each control character is shown as `\xNN`
 * (a bidirectional control or a line separator as `\uNNNN`) instead of being sent. Session names,
 * agents' results and errors, host names are anyone's text, and an escape sequence in one would
 * drive the reader's terminal: clear the screen, rewrite the lines above it (a failed job shown
 * as completed), set the window title. Tabs and line feeds stay: this is for whole texts (a
 * result, the output of a command); a value that must keep to its line goes through printableLine.
 */
export function printable(text: string): string {
  return text.replace(CONTROL, (c: string, at: number) => (c === '\r' && text[at + 1] === '\n' ? '' : shown(c)));
}

/**
 * One value on one line (a session name, a job id, an error in a field or a cell): as printable,
 * and a line feed or tab is shown as `\n`, `\t` too. A session name may hold a line break, and
 * sent as it is it would start a line of its own, which could pass for another field or row.
 */
export function printableLine(text: string): string {
  return text.replace(LINE_CONTROL, shown);
}

/** Cut `text` to at most `max` display columns, ending with `…` when it was cut. */
export function truncate(text: string, max: number): string {
  if (stringWidth(text) <= max) return text;
  let out = '';
  let width = 0;
  // whole grapheme clusters only: never split an emoji sequence or a letter from its accent
  for (const { segment } of segmenter.segment(text)) {
    const w = stringWidth(segment);
    if (width + w > max - 1) break;
    out += segment;
    width += w;
  }
  return `${out}…`;
}

/** Pad `text` with spaces to `width` display columns. */
export function padEnd(text: string, width: number): string {
  return text + ' '.repeat(Math.max(0, width - stringWidth(text)));
}

/**
 * Left-aligned columns, two spaces apart; each cell on one line (a line break in it shown as
 * `\n`), cut to `maxWidth` columns. A cell that is a preview of free text (a result) collapses
 * its white space first: see `preview`.
 */
export function table(header: readonly string[], rows: readonly (readonly string[])[], maxWidth = 48): string {
  const cells = [header, ...rows].map((r) => r.map((c) => truncate(printableLine(c), maxWidth)));
  const widths = header.map((_, i) => Math.max(...cells.map((r) => stringWidth(r[i] ?? ''))));
  return cells
    .map((r) =>
      r
        .map((c, i) => (i === r.length - 1 ? c : padEnd(c, widths[i] ?? 0)))
        .join('  ')
        .trimEnd(),
    )
    .join('\n');
}

/** Free text (a result, an error) as a one-line preview: each run of white space one space. */
export const preview = (text: string): string => text.replace(/\s+/g, ' ');

export { stringWidth };
