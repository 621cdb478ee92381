// A session's terminal in the page: xterm.js on the app proxy's terminal WebSocket
// (docs/appproxy.md "The terminal"). startApp(session, "terminal") gives the URL and its
// short-lived token; the shell's output arrives as binary frames; what is typed goes out as
// binary frames and a resize as the text frame {"resize": [cols, rows]}.

import { FitAddon } from "../vendor/xterm-addon-fit/0.11.0/addon-fit.mjs";
import { Terminal } from "../vendor/xterm/6.0.0/xterm.mjs";
import { gql } from "./api.js";

const START = `mutation OpenTerminal($id: ID!) { startApp(sessionId: $id, app: "terminal") { url expiresAt } }`;
const encoder = new TextEncoder();
const RETRIES = 20;
const RETRY_MS = 1000;

let stylesheet = null;
function loadStylesheet() {
  // Only pages with a terminal need xterm's CSS.
  if (stylesheet === null) {
    stylesheet = document.createElement("link");
    stylesheet.rel = "stylesheet";
    stylesheet.href = new URL("../vendor/xterm/6.0.0/xterm.css", import.meta.url).href;
    document.head.append(stylesheet);
  }
}

/**
 * Open the terminal of `sessionId` in `container`. onClose(text) is called once when the
 * connection ends. Returns close().
 */
export async function openTerminal(container, sessionId, { onClose = () => {} } = {}) {
  loadStylesheet();
  // Each try asks for a URL of its own: a URL's token opens one connection, once.
  const terminalUrl = async () => {
    const { startApp } = await gql(START, { id: sessionId });
    const url = new URL(startApp.url);
    url.protocol = url.protocol === "https:" ? "wss:" : "ws:";
    return url;
  };
  let first = await terminalUrl();
  const term = new Terminal({
    cursorBlink: true,
    fontFamily: "ui-monospace, 'DejaVu Sans Mono', Menlo, Consolas, monospace",
    fontSize: 13,
    scrollback: 5000,
    theme: { background: "#000000", foreground: "#e6e6e6" },
  });
  const fit = new FitAddon();
  term.loadAddon(fit);
  term.open(container);
  fit.fit();
  let socket = null;
  let ended = false;
  let tries = 0;
  const end = (text) => {
    if (ended) return;
    ended = true;
    term.write(`\r\n\x1b[2m[${text}]\x1b[0m\r\n`);
    onClose(text);
  };
  const connect = async () => {
    let url = first;
    first = null;
    if (url === null) {
      try {
        url = await terminalUrl();
      } catch (error) {
        end(`terminal not available: ${error.message ?? error}`);
        return;
      }
    }
    if (ended) return;
    url.searchParams.set("cols", String(term.cols));
    url.searchParams.set("rows", String(term.rows));
    const ws = new WebSocket(url);
    ws.binaryType = "arraybuffer";
    let opened = false;
    ws.onopen = () => {
      opened = true;
      term.focus();
    };
    ws.onmessage = (event) => {
      term.write(typeof event.data === "string" ? event.data : new Uint8Array(event.data));
    };
    ws.onclose = (event) => {
      if (socket !== ws) return;
      // Refused before it opened: the proxy may not have folded the session's start yet
      // (it reads the same log a moment later); the next try asks for a new URL.
      if (!opened && !ended && tries < RETRIES) {
        tries += 1;
        setTimeout(() => { if (!ended) connect(); }, RETRY_MS);
        return;
      }
      end(event.code === 1000 || event.code === 1001
        ? `terminal closed${event.reason ? `: ${event.reason}` : ""}`
        : `terminal connection ended (${event.code}${event.reason ? ` ${event.reason}` : ""})`);
    };
    socket = ws;
  };
  connect();
  // Typed text as bytes, so nothing a person types can read as a resize request.
  const typed = term.onData((data) => {
    if (socket?.readyState === WebSocket.OPEN) socket.send(encoder.encode(data));
  });
  const resized = term.onResize(({ cols, rows }) => {
    if (socket?.readyState === WebSocket.OPEN) socket.send(JSON.stringify({ resize: [cols, rows] }));
  });
  const observer = new ResizeObserver(() => fit.fit());
  observer.observe(container);
  return () => {
    observer.disconnect();
    typed.dispose();
    resized.dispose();
    ended = true;
    if (socket !== null && socket.readyState <= WebSocket.OPEN) socket.close(1000);
    term.dispose();
  };
}
