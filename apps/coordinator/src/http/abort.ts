import type { FastifyReply } from 'fastify';
import type { AnswerHold } from '../core/answer-budget.js';

/** An AbortSignal that fires when the client goes away before the answer is sent. */
export function clientGone(reply: FastifyReply): AbortSignal {
  const controller = new AbortController();
  reply.raw.once('close', () => {
    if (!reply.raw.writableFinished) controller.abort(new Error('client closed the connection'));
  });
  return controller.signal;
}

/**
 * An answer's text counts in MAX_ANSWER_BYTES_IN_FLIGHT until its response is written out or
 * abandoned: released at once when the client has already gone (its close has been and will not
 * come again).
 */
export function untilClosed(reply: FastifyReply): AnswerHold {
  return (release) => {
    if (reply.raw.closed || reply.raw.destroyed) release();
    else reply.raw.once('close', release);
  };
}
