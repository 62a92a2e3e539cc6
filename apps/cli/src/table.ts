import stringWidth from 'string-width';

/*
 * Text tables for people. Widths are display columns (`string-width`: a CJK character or an
 * emoji takes two, a combining mark none), not UTF-16 code units, so columns line up whatever
 * the session names are made of.
 */

const segmenter = new Intl.Segmenter(undefined, { granularity: 'grapheme' });

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
  const cells = [header, ...rows].map((r) => r.map((c) => truncate(c.replace(/\s+/g, ' '), maxWidth)));
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
