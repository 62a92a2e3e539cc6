import { Argument, type Command } from 'commander';
import { completionScript, SHELLS, type Shell } from '../completion.js';
import type { Act } from '../program.js';

/** `agentq completion bash|zsh|fish`: print the completion script, generated from the commands. */
export function registerCompletion(program: Command, act: Act): void {
  program
    .command('completion')
    .summary('print the shell completion script (bash, zsh or fish)')
    .addArgument(new Argument('<shell>', 'the shell').choices(SHELLS))
    .addHelpText(
      'after',
      `
Load it in the current shell, or add the line to your shell's startup file:
  bash:  source <(agentq completion bash)          (~/.bashrc)
  zsh:   source <(agentq completion zsh)           (~/.zshrc, after compinit)
  fish:  agentq completion fish | source           (or save it as ~/.config/fish/completions/agentq.fish)`,
    )
    .action(
      act(async (_ctx, cmd) => {
        const [shell] = cmd.processedArgs as [Shell];
        const script = completionScript(program, shell);
        return { data: { shell, script }, exitCode: 0, text: () => script };
      }),
    );
}
