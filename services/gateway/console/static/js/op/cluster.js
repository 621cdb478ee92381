// The cluster now, as the `cluster` query answers it (flat lists: nodes, GPUs, holds,
// kernels, queues, waiting sessions, notes), joined back into nodes with their GPUs and
// groups with their queues for the pages to draw. Each page asks only what it draws: the
// gateway works out only the lists asked.

import { gql } from "../api.js";
import { hundredths } from "./format.js";

const RESOURCES = "{ cpu memoryBytes gpu }";
// Plain strings, not templates: bench/console.py fills the queries' ${NAME} parts from them.
const KERNEL = "nodeId sessionId sessionName kernelId user started since resources { cpu memoryBytes gpu }";
const NOTE = "sessionId resourceGroup kind text";

/** The Cluster page: every node's card and GPU map, the notes; the kernels of the open cards only. */
export const CLUSTER = `query Cluster($open: [ID!]! = []) { cluster {
  seq sessionsOnNodes
  nodes { id hostname resourceGroup state reason allocations capacity ${RESOURCES} used ${RESOURCES} }
  devices { nodeId index name memoryBytes numaNode mig usedHundredths }
  holds { nodeId index sessionId sessionName user hundredths whole }
  kernels(nodeIds: $open) { ${KERNEL} }
  queues { resourceGroup length }
  waiting { resourceGroup sessionId }
  notes { ${NOTE} }
} }`;

/** The kernels of some nodes (a card opened). */
export const NODE_KERNELS = `query NodeKernels($ids: [ID!]!) { cluster {
  seq kernels(nodeIds: $ids) { ${KERNEL} }
} }`;

/** The Queue page: the queues, their waiting sessions and the notes; no node. */
export const QUEUE = `query Queue { cluster {
  seq
  queues { resourceGroup length }
  waiting {
    resourceGroup sessionId name user domain position clusterSize clusterMode priority admitted
    reason createdAt perKernel ${RESOURCES}
  }
  notes { ${NOTE} }
} }`;

export function groupBy(items, key) {
  const out = new Map();
  for (const item of items) {
    const k = key(item);
    if (!out.has(k)) out.set(k, []);
    out.get(k).push(item);
  }
  return out;
}

/**
 * The answer joined: {seq, sessionsOnNodes, nodes: [{...node, devices: [{...device, holds}],
 * kernels}], groups, notes}. A node's `kernels` is null where they were not asked.
 */
export function joined(cluster) {
  const holds = groupBy(cluster.holds ?? [], (h) => `${h.nodeId}/${h.index}`);
  const devices = groupBy(cluster.devices ?? [], (d) => d.nodeId);
  const kernels = groupBy(cluster.kernels ?? [], (k) => k.nodeId);
  const notes = new Map((cluster.notes ?? []).map((n) => [n.sessionId, n]));
  const waiting = groupBy(cluster.waiting ?? [], (w) => w.resourceGroup);
  const nodes = (cluster.nodes ?? []).map((node) => {
    const gpus = (devices.get(node.id) ?? []).map((d) => ({ ...d, holds: holds.get(`${node.id}/${d.index}`) ?? [] }));
    const capacity = hundredths(node.capacity.gpu);
    const used = hundredths(node.used.gpu);
    return {
      ...node, devices: gpus, kernels: cluster.kernels ? kernels.get(node.id) ?? [] : null,
      gpuCapacity: capacity, gpuFree: capacity - used,
    };
  });
  const groups = (cluster.queues ?? []).map((q) => ({
    name: q.resourceGroup,
    length: q.length,
    waiting: (waiting.get(q.resourceGroup) ?? []).map((w) => ({ ...w, note: notes.get(w.sessionId) ?? null })),
  }));
  return { seq: cluster.seq, sessionsOnNodes: cluster.sessionsOnNodes ?? null, nodes, groups, notes: cluster.notes ?? [] };
}

/** The Cluster page's picture, with the kernels of the nodes in `open` (ids). */
export async function loadCluster(open = []) {
  return joined((await gql(CLUSTER, { open: [...open] })).cluster);
}

/** The kernels of some nodes now: Map node id -> kernels. */
export async function loadKernels(ids) {
  const found = groupBy((await gql(NODE_KERNELS, { ids: [...ids] })).cluster.kernels, (k) => k.nodeId);
  return new Map([...ids].map((id) => [id, found.get(id) ?? []]));
}

export async function loadQueues() {
  return joined((await gql(QUEUE)).cluster);
}
