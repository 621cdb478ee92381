// The cluster now, as the `cluster` query answers it (flat lists: nodes, GPUs, holds,
// kernels, queues, waiting sessions, notes), joined back into nodes with their GPUs and
// groups with their queues for the pages to draw.

import { gql } from "../api.js";
import { hundredths } from "./format.js";

const RESOURCES = "{ cpu memoryBytes gpu }";
export const CLUSTER = `query Cluster { cluster {
  seq
  nodes { id hostname resourceGroup state reason cordoned lost allocations capacity ${RESOURCES} used ${RESOURCES} }
  devices { nodeId index uuid name memoryBytes numaNode mig usedHundredths }
  holds { nodeId index sessionId sessionName kernelId user hundredths whole }
  kernels { nodeId sessionId sessionName kernelId user started since resources ${RESOURCES} }
  queues { resourceGroup length }
  waiting {
    resourceGroup sessionId name user domain position clusterSize clusterMode priority admitted
    reason createdAt perKernel ${RESOURCES}
  }
  notes { sessionId resourceGroup kind text freeGpu needGpu }
} }`;

function groupBy(items, key) {
  const out = new Map();
  for (const item of items) {
    const k = key(item);
    if (!out.has(k)) out.set(k, []);
    out.get(k).push(item);
  }
  return out;
}

/** The answer joined: {seq, nodes: [{...node, devices: [{...device, holds}], kernels}], groups, notes}. */
export function joined(cluster) {
  const holds = groupBy(cluster.holds, (h) => `${h.nodeId}/${h.index}`);
  const devices = groupBy(cluster.devices, (d) => d.nodeId);
  const kernels = groupBy(cluster.kernels, (k) => k.nodeId);
  const notes = new Map(cluster.notes.map((n) => [n.sessionId, n]));
  const waiting = groupBy(cluster.waiting, (w) => w.resourceGroup);
  const nodes = cluster.nodes.map((node) => {
    const gpus = (devices.get(node.id) ?? []).map((d) => ({ ...d, holds: holds.get(`${node.id}/${d.index}`) ?? [] }));
    const capacity = hundredths(node.capacity.gpu);
    const used = hundredths(node.used.gpu);
    return { ...node, devices: gpus, kernels: kernels.get(node.id) ?? [], gpuCapacity: capacity, gpuFree: capacity - used };
  });
  const groups = cluster.queues.map((q) => ({
    name: q.resourceGroup,
    length: q.length,
    waiting: (waiting.get(q.resourceGroup) ?? []).map((w) => ({ ...w, note: notes.get(w.sessionId) ?? null })),
  }));
  return { seq: cluster.seq, nodes, groups, notes: cluster.notes };
}

export async function loadCluster() {
  return joined((await gql(CLUSTER)).cluster);
}
