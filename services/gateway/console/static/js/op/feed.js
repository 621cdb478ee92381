// The operator pages' live feed: the clusterChanges subscription (a tick once the views hold
// a change to a node, an agent, a session or a queue), and a refresher that runs a page's
// load once per burst of ticks, never two at once. No polling: a page asks again only when
// the gateway says something changed, or when the live connection comes back.

import * as live from "../live.js";

export const CLUSTER_CHANGES = `subscription ClusterChanges {
  clusterChanges { seq nodeIds sessions queues }
}`;

/** Call onTick(change) on every tick (and onTick(null) after a reconnect) until the page is left. */
export function followCluster(scope, onTick, { onError } = {}) {
  const stop = live.subscribe(CLUSTER_CHANGES, {}, {
    next: (data) => onTick(data.clusterChanges),
    error: onError,
  });
  let wasLive = live.currentState() === "live";
  const listener = (event) => {
    // Ticks missed while the connection was down are not replayed: ask again once.
    if (event.detail === "live" && !wasLive) onTick(null);
    wasLive = event.detail === "live";
  };
  live.state.addEventListener("change", listener);
  scope.onLeave(() => {
    stop();
    live.state.removeEventListener("change", listener);
  });
}

/** A function that runs `load` now, or once more after the run in progress if called during it. */
export function refresher(load) {
  let running = null;
  let again = false;
  const run = async () => {
    if (running) {
      again = true;
      return running;
    }
    running = (async () => {
      try {
        do {
          again = false;
          await load();
        } while (again);
      } finally {
        running = null;
      }
    })();
    return running;
  };
  return run;
}
