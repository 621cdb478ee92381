// What the session pages share: the status subscription, and the words for a session's
// resources and wait.

import { gql } from "./api.js";
import { resourcesWords } from "./dom.js";
import * as live from "./live.js";

export const STATUS_SUBSCRIPTION = `subscription SessionStatus($id: ID!) {
  sessionStatus(id: $id) { status reason at seq queuePosition queueLength }
}`;

/** Follow one session's status changes; next(change) for each (queue moves repeat a seq). */
export function followStatus(scope, sessionId, next, { error, complete } = {}) {
  const stop = live.subscribe(STATUS_SUBSCRIPTION, { id: sessionId }, {
    next: (data) => next(data.sessionStatus),
    error,
    complete,
  });
  scope.onLeave(stop);
  return stop;
}

/** What a session holds: "1 CPU · 256 MiB", or for a cluster session each kernel's share and
 * the total (the API's `resources` is already the total: never multiplied here). */
export function resourcesText(session) {
  const total = resourcesWords(session.resources);
  if (!(session.clusterSize > 1) || !session.resourcesPerKernel) return total;
  return `${session.clusterSize} kernels × (${resourcesWords(session.resourcesPerKernel)}) = ${total}`;
}

/** "3rd of 7 waiting" while PENDING with a known place. */
export function queueText(position, length) {
  if (position === null || position === undefined) return "";
  return `${position} of ${length} waiting`;
}

export function sessionLabel(session) {
  return session.name || session.id;
}

const CATCH_UP_MS = [0, 300, 1000, 2500];

/**
 * Ask `query` (it selects `session { status ... }`) until the view holds `status`: the
 * subscription reads the log, the view follows it a moment later. A few tries, at once and
 * then spaced out; the last answer either way.
 */
export async function sessionAsOf(query, id, status, scope) {
  let session = null;
  for (const pause of CATCH_UP_MS) {
    if (pause) await new Promise((done) => { setTimeout(done, pause); });
    if (scope.left) return null;
    session = (await gql(query, { id })).session;
    if (session === null || session.status === status) return session;
  }
  return session;
}
