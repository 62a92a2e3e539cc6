#!/usr/bin/env node
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { emit, readInvocation, runExecutor } from './contract.js';

/**
 * The demo executor: a pretend agent turn with no external dependency. It takes a moment,
 * streams a few lines, and answers by quoting the prompt, so `npm start` shows the whole loop.
 * AGENTQ_DEMO_STEP_MS sets the pause between lines (default 400).
 */
runExecutor(async () => {
  const inv = await readInvocation();
  const stepMs = Number(process.env['AGENTQ_DEMO_STEP_MS'] ?? 400) || 0;
  const sessionId = inv.mode === 'resume' && inv.executor_session_id ? inv.executor_session_id : `demo-${randomUUID()}`;
  emit({ type: 'session', session_id: sessionId });
  const steps = [
    `${inv.mode === 'resume' ? 'Resuming' : 'Starting'} session "${inv.session_name}"` +
      (inv.agent_name ? ` as ${inv.agent_name}` : ''),
    'Reading the prompt...',
    'Thinking...',
    'Writing the answer...',
  ];
  for (const step of steps) {
    emit({ type: 'output', text: `${step}\n` });
    await sleep(stepMs);
  }
  emit({ type: 'result', text: `Demo agent received: "${inv.prompt}"` });
});
