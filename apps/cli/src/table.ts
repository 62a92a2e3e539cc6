import stringWidth from 'string-width';

/*
 * Text tables for people. Widths are display columns (`string-width`: a CJK character or an
 * emoji takes two, a combining mark none), not UTF-16 code units, so columns line up whatever
 * the session names are made of.
 */

const segmenter = new Intl.Segmenter(undefined, { granularity: 'grapheme' });

/** Control characters a terminal acts on: C0 but tab and line feed, DEL, C1; a CR before a LF goes. */
const CONTROL = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/g;

/**
 * Text from the coordinator made safe for a terminal: each control character is shown as `\xNN`
 * instead of being sent. Session names, agents' results and errors, host names are anyone's text,
 * and an escape sequence in one would drive the reader's terminal: clear the screen, rewrite the
 * lines above it (a failed job shown as completed), set the window title.
 */
export function printable(text: string): string {
  return text.replace(CONTROL, (c: string, at: number) =>
    c === '\r' && text[at + 1] === '\n' ? '' : `\\x${c.charCodeAt(0).toString(16).padStart(2, '0')}`,
  );
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

/** Left-aligned columns, two spaces apart; each cell on one line, cut to `maxWidth` columns. */
export function table(header: readonly string[], rows: readonly (readonly string[])[], maxWidth = 48): string {
  const cells = [header, ...rows].map((r) => r.map((c) => truncate(printable(c.replace(/\s+/g, ' ')), maxWidth)));
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

export { stringWidth };
