import type { Launcher, LauncherList } from '@agentq/protocol';
import type { Command } from 'commander';
import { nameArg } from '../args.js';
import { formatDuration } from '../duration.js';
import { notFoundOn } from '../errors.js';
import { commandHelpAfter } from '../help.js';
import type { Act } from '../program.js';
import { dash, formatLabels, table } from '../render.js';
import { printableLine } from '../table.js';

/** `agentq launchers`: the registered launchers; `agentq launchers rm <id>` deregisters one. */
export function registerLaunchers(program: Command, act: Act): void {
  const launchers = program
    .command('launchers')
    .summary('registered launchers: status, labels, project roots, jobs held')
    .action(
      act(async (ctx) => {
        // every page: the table lists the whole registry, read a page at a time
        const launchers = await ctx.client.listAllLaunchers({ signal: ctx.signal });
        const data: LauncherList = { launchers, next_cursor: null };
        return { data, exitCode: 0, text: () => renderLaunchers(data) };
      }),
    );
  launchers
    .command('rm')
    .summary('deregister a launcher: told on its next poll, it finishes or stops its jobs and exits')
    .argument('<launcher_id>', 'the launcher (lnch_…)', nameArg('a launcher id (lnch_…)'))
    .addHelpText(
      'after',
      commandHelpAfter(
        'outcome deregistering: the launcher is told on its next poll; removed: it was\nalready gone (stale) and is removed at once. Exits 5 for an unknown id.',
      ),
    )
    .action(
      act(async (ctx, cmd) => {
        const [id] = cmd.processedArgs as [string];
        const data = await notFoundOn('launcher_not_found', ctx.client.deleteLauncher(id, { signal: ctx.signal }));
        return { data, exitCode: 0, text: () => printableLine(`${data.launcher_id}: ${data.outcome}`) };
      }),
    );
}

/** Labels other than the ones the HOST and EXECUTOR columns already show. */
function extraLabels(l: Launcher): string {
  const labels = { ...(l.labels ?? {}) };
  if (labels.hostname === l.hostname) delete labels.hostname;
  if (labels.executor === l.executor_type) delete labels.executor;
  return formatLabels(labels);
}

export function renderLaunchers(data: LauncherList): string {
  if (data.launchers.length === 0) return 'no launchers registered';
  return table(
    ['LAUNCHER', 'STATUS', 'HOST', 'EXECUTOR', 'JOBS', 'HEARTBEAT', 'LABELS', 'ROOTS'],
    data.launchers.map((l) => [
      l.launcher_id,
      l.status,
      dash(l.hostname),
      dash(l.executor_type),
      // (an older coordinator may leave out the lists and the heartbeat's age)
      `${l.active_jobs?.length ?? '-'}/${l.max_jobs ?? '-'}`,
      typeof l.seconds_since_heartbeat === 'number' ? `${formatDuration(l.seconds_since_heartbeat * 1000)} ago` : '-',
      dash(extraLabels(l)),
      dash((l.project_roots?.length ? l.project_roots : l.project_dir ? [l.project_dir] : []).join(',')),
    ]),
    64,
  );
}
