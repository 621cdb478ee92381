// GraphQL subscriptions over one WebSocket (graphql-transport-ws), shared by every page.
// Opened on the first subscription, authenticated in connection_init as HTTP requests are,
// closed a while after the last one ends. A dropped connection is opened again with a
// growing pause and every running subscription is sent again with its variables asked anew
// (so a page resumes output from the line it has, not from the start).

import * as auth from "./auth.js";
import { GRAPHQL_PATH, GraphQLFailure, failure } from "./graphql.js";

const PROTOCOL = "graphql-transport-ws";
const IDLE_CLOSE_MS = 10_000;
const RETRY_MS = [500, 1000, 2000, 5000, 10_000, 15_000];

export const state = new EventTarget(); // "change": detail is "live" | "connecting" | "offline"
let status = "offline";
let socket = null;
let acked = false;
let retries = 0;
let idleTimer = null;
let retryTimer = null;
let nextId = 1;
const running = new Map(); // id -> {query, variables, handlers}

function say(next) {
  if (next === status) return;
  status = next;
  state.dispatchEvent(new CustomEvent("change", { detail: status }));
}

export function currentState() {
  return status;
}

function send(message) {
  if (socket?.readyState === WebSocket.OPEN) socket.send(JSON.stringify(message));
}

function start(id) {
  const sub = running.get(id);
  const variables = typeof sub.variables === "function" ? sub.variables() : sub.variables;
  send({ id, type: "subscribe", payload: { query: sub.query, variables } });
}

function connect() {
  if (socket !== null || auth.current() === null) return;
  clearTimeout(retryTimer);
  say("connecting");
  const url = new URL(GRAPHQL_PATH, location.href);
  url.protocol = location.protocol === "https:" ? "wss:" : "ws:";
  const ws = new WebSocket(url, PROTOCOL);
  socket = ws;
  acked = false;
  ws.onopen = async () => {
    try {
      ws.send(JSON.stringify({ type: "connection_init", payload: await auth.connectionParams() }));
    } catch (error) {
      endAll(error);
      ws.close(1000);
    }
  };
  ws.onmessage = (event) => receive(JSON.parse(event.data));
  ws.onclose = (event) => closed(ws, event);
}

function receive(message) {
  const sub = running.get(message.id);
  switch (message.type) {
    case "connection_ack":
      acked = true;
      retries = 0;
      say("live");
      for (const id of running.keys()) start(id);
      break;
    case "ping":
      send({ type: "pong" });
      break;
    case "next":
      if (!sub) break;
      if (message.payload.errors?.length) sub.handlers.error?.(new GraphQLFailure(message.payload.errors));
      else sub.handlers.next?.(message.payload.data);
      break;
    case "error":
      if (!sub) break;
      running.delete(message.id);
      sub.handlers.error?.(new GraphQLFailure(message.payload));
      break;
    case "complete":
      if (!sub) break;
      running.delete(message.id);
      sub.handlers.complete?.();
      break;
    default:
      break;
  }
}

function closed(ws, event) {
  if (socket !== ws) return;
  socket = null;
  say("offline");
  if (event.code === 4403 || event.code === 4401) {
    // Refused in connection_init: the credentials are no longer good.
    endAll(failure("unauthenticated", `the gateway refused the live connection: ${event.reason || event.code}`));
    return;
  }
  if (running.size > 0 && auth.current() !== null) {
    const pause = RETRY_MS[Math.min(retries, RETRY_MS.length - 1)];
    retries += 1;
    retryTimer = setTimeout(connect, pause);
  }
}

function endAll(error) {
  const subs = [...running.values()];
  running.clear();
  for (const sub of subs) sub.handlers.error?.(error);
}

/**
 * Start a subscription. `variables` may be a function, asked again on every (re)start.
 * Handlers: next(data), error(GraphQLFailure), complete(). Returns stop().
 */
export function subscribe(query, variables, handlers) {
  const id = String(nextId++);
  running.set(id, { query, variables, handlers });
  clearTimeout(idleTimer);
  if (socket === null) connect();
  else if (acked) start(id);
  return () => {
    if (!running.delete(id)) return;
    if (acked) send({ id, type: "complete" });
    if (running.size === 0) {
      clearTimeout(idleTimer);
      idleTimer = setTimeout(() => { if (running.size === 0) socket?.close(1000); }, IDLE_CLOSE_MS);
    }
  };
}

auth.changes.addEventListener("change", () => {
  if (auth.current() === null) {
    running.clear();
    socket?.close(1000);
  }
});
