import { parse } from 'shell-quote';

/**
 * Split a setting such as AGENTQ_CLAUDE_ARGS into words the way a shell would (quotes and
 * backslashes work: `--allowedTools "Read Grep"` is two words), without running a shell: no
 * variable expansion (`$X` stays as written), no globbing, and shell operators (`|`, `;`, `>`...)
 * are refused rather than silently dropped. Throws an Error naming `setting`.
 */
export function shellWords(text: string, setting: string): string[] {
  const words: string[] = [];
  for (const entry of parse(text, (name: string) => `$${name}`)) {
    if (typeof entry === 'string') words.push(entry);
    else if ('comment' in entry) break;
    else if (entry.op === 'glob') words.push(entry.pattern);
    else throw new Error(`${setting}: the shell operator ${JSON.stringify(entry.op)} is not supported; quote it`);
  }
  return words;
}
