// The operator pages' live feed: the clusterChanges subscription (a tick once the views hold
// a change to a node, an agent, a session or a queue), and a refresher that runs a page's
// load once per burst of ticks, never two at once. No polling: a page asks again only when
// the gateway says something changed, or when the live connection comes back.

import * as live from "../live.js";

const TICK = "seq nodeIds sessions queues";

/** The subscription, each tick with `fields` of ClusterChange besides its own (e.g. the named
 * nodes' rows: `nodes { … } gpuMap`). */
export function clusterChanges(fields = "") {
  return `subscription ClusterChanges($every: Int! = 500) {
  clusterChanges(everyMs: $every) { ${TICK} ${fields} }
}`;
}

/** Call onTick(change) on every tick (and onTick(null) after a reconnect, not after the first
 * connection) until the page is left; at most one tick every `every` ms; each tick with
 * `fields` besides its own. */
export function followCluster(scope, onTick, { onError, every = 500, fields = "" } = {}) {
  const stop = live.subscribe(clusterChanges(fields), { every }, {
    next: (data) => onTick(data.clusterChanges),
    error: onError,
  });
  // Ticks missed while the connection was down are not replayed: ask again once when it comes
  // back. Only a connection lost after it was live is missed ticks: the first "live" after
  // subscribing is the connection opening, and the page has just asked.
  let wasLive = live.currentState() === "live";
  let dropped = false;
  const listener = (event) => {
    if (event.detail === "live") {
      if (dropped) onTick(null);
      dropped = false;
      wasLive = true;
    } else if (wasLive) {
      dropped = true;
    }
  };
  live.state.addEventListener("change", listener);
  scope.onLeave(() => {
    stop();
    live.state.removeEventListener("change", listener);
  });
}

/** A function that runs `load` now, or once more after the run in progress if called during
 * it; runs start at least `gapMs` apart (the calls in between fold into the next run). */
export function refresher(load, { gapMs = 0 } = {}) {
  let running = null;
  let again = false;
  let last = 0;
  const run = async () => {
    if (running) {
      again = true;
      return running;
    }
    running = (async () => {
      try {
        do {
          again = false;
          const wait = last + gapMs - Date.now();
          if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
          last = Date.now();
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
