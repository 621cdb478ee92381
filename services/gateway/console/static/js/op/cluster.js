// The cluster now, as the `cluster` query answers it (flat lists: nodes, GPUs, holds,
// kernels, queues, waiting sessions, notes), joined back into nodes with their GPUs and
// groups with their queues for the pages to draw. Each page asks only what it draws: the
// gateway works out only the lists asked.

import { gql } from "../api.js";
import { hundredths } from "./format.js";

const RESOURCES = "{ cpu memoryBytes gpu }";
// Plain strings, not templates: bench/console.py fills the queries' ${NAME} parts from them.
export const NODE = "id hostname resourceGroup state reason allocations capacity { cpu memoryBytes gpu } used { cpu memoryBytes gpu } pulls { reference doneBytes totalBytes kernels }";
const KERNEL = "nodeId sessionId sessionName kernelId user started since resources { cpu memoryBytes gpu }";
const NOTE = "sessionId resourceGroup kind text situation";

/** The Cluster page: every node and its GPU map (one compact value), the queues and notes;
 * the kernels of the open cards only. */
export const CLUSTER = `query Cluster($open: [ID!]! = []) { cluster {
  seq sessionsOnNodes
  nodes { ${NODE} }
  gpuMap
  kernels(nodeIds: $open) { ${KERNEL} }
  queues { resourceGroup length }
  waiting { resourceGroup sessionId name position }
  notes { ${NOTE} }
} }`;

/** Some nodes again (a tick named them): their cards, and the kernels of those open. */
export const NODES = `query ClusterNodes($ids: [ID!]!, $open: [ID!]! = []) { cluster {
  seq sessionsOnNodes
  nodes(nodeIds: $ids) { ${NODE} }
  gpuMap(nodeIds: $ids)
  kernels(nodeIds: $open) { ${KERNEL} }
} }`;

/** The queues and why they wait, without any node (the Cluster page's notes on a tick). */
export const NOTES = `query ClusterNotes { cluster {
  seq
  queues { resourceGroup length }
  waiting { resourceGroup sessionId name position }
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
    reason createdAt perKernel ${RESOURCES} fairShare { domain project user }
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

/** A node as the pages draw it: its GPUs (from `gpuMap`, or from `devices` and `holds`),
 * its kernels (null where they were not asked) and its GPU capacity and free in hundredths. */
export function nodeOf(node, devices, kernels) {
  const capacity = hundredths(node.capacity.gpu);
  const used = hundredths(node.used.gpu);
  return { ...node, devices: devices ?? [], kernels, gpuCapacity: capacity, gpuFree: capacity - used };
}

/** The groups with their waiting sessions, each with its note: [{name, length, waiting}]. */
export function groupsOf(cluster) {
  const notes = new Map((cluster.notes ?? []).map((n) => [n.sessionId, n]));
  const waiting = groupBy(cluster.waiting ?? [], (w) => w.resourceGroup);
  return (cluster.queues ?? []).map((q) => ({
    name: q.resourceGroup,
    length: q.length,
    waiting: (waiting.get(q.resourceGroup) ?? []).map((w) => ({ ...w, note: notes.get(w.sessionId) ?? null })),
  }));
}

/**
 * The answer joined: {seq, sessionsOnNodes, nodes: [{...node, devices: [{...device, holds}],
 * kernels}], groups, notes}. A node's `kernels` is null where they were not asked.
 */
export function joined(cluster) {
  const kernels = groupBy(cluster.kernels ?? [], (k) => k.nodeId);
  let devicesOf;
  if (cluster.gpuMap) {
    devicesOf = (id) => cluster.gpuMap[id];
  } else {
    const holds = groupBy(cluster.holds ?? [], (h) => `${h.nodeId}/${h.index}`);
    const devices = groupBy(cluster.devices ?? [], (d) => d.nodeId);
    devicesOf = (id) => (devices.get(id) ?? []).map((d) => ({ ...d, holds: holds.get(`${id}/${d.index}`) ?? [] }));
  }
  const nodes = (cluster.nodes ?? []).map((node) =>
    nodeOf(node, devicesOf(node.id), cluster.kernels ? kernels.get(node.id) ?? [] : null));
  return { seq: cluster.seq, sessionsOnNodes: cluster.sessionsOnNodes ?? null, nodes, groups: groupsOf(cluster), notes: cluster.notes ?? [] };
}

/** The Cluster page's picture, with the kernels of the nodes in `open` (ids). */
export async function loadCluster(open = []) {
  return joined((await gql(CLUSTER, { open: [...open] })).cluster);
}

/** Some nodes now, with the kernels of those in `open`: {seq, sessionsOnNodes, nodes}; a node
 * that is gone is missing from `nodes`. */
export async function loadNodes(ids, open = []) {
  return joined((await gql(NODES, { ids: [...ids], open: [...open] })).cluster);
}

/** What a clusterChanges tick carries of the nodes it names (ask them with `CHANGED`):
 * {seq, sessionsOnNodes, nodes} as `loadNodes` answers, without kernels. */
export const CHANGED = `sessionsOnNodes nodes { ${NODE} } gpuMap`;
export function changedNodes(change) {
  return joined({ seq: change.seq, sessionsOnNodes: change.sessionsOnNodes, nodes: change.nodes, gpuMap: change.gpuMap });
}

/** The queues and the notes now: {seq, groups, notes}. */
export async function loadNotes() {
  return joined((await gql(NOTES)).cluster);
}

/** The kernels of some nodes now: Map node id -> kernels. */
export async function loadKernels(ids) {
  const found = groupBy((await gql(NODE_KERNELS, { ids: [...ids] })).cluster.kernels, (k) => k.nodeId);
  return new Map([...ids].map((id) => [id, found.get(id) ?? []]));
}

export async function loadQueues() {
  return joined((await gql(QUEUE)).cluster);
}
