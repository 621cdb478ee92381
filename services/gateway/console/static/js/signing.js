// Keypair request signing in the browser (WebCrypto), the scheme of schemas/signing.py:
// k = HMAC(HMAC(secret, YYYYMMDD), host), signature = hex(HMAC-SHA256(k, string to sign)).
// The console keeps only k (one host, one UTC day), never the secret key.

const encoder = new TextEncoder();

export function available() {
  // crypto.subtle exists only in a secure context: https, or http on 127.0.0.1/localhost.
  return Boolean(globalThis.crypto && crypto.subtle);
}

function hex(buffer) {
  return [...new Uint8Array(buffer)].map((b) => b.toString(16).padStart(2, "0")).join("");
}

function unhex(text) {
  const bytes = new Uint8Array(text.length / 2);
  for (let i = 0; i < bytes.length; i += 1) bytes[i] = parseInt(text.slice(2 * i, 2 * i + 2), 16);
  return bytes;
}

async function hmac(keyBytes, data) {
  const key = await crypto.subtle.importKey(
    "raw", keyBytes, { name: "HMAC", hash: "SHA-256" }, false, ["sign"],
  );
  return crypto.subtle.sign("HMAC", key, typeof data === "string" ? encoder.encode(data) : data);
}

const pad = (n) => String(n).padStart(2, "0");

/** The UTC day that keys a signature: "YYYYMMDD". */
export function utcDay(date) {
  return `${date.getUTCFullYear()}${pad(date.getUTCMonth() + 1)}${pad(date.getUTCDate())}`;
}

/** X-Jetyard-Date as Python's isoformat(timespec="seconds") writes it in UTC. */
export function formatDate(date) {
  return `${date.getUTCFullYear()}-${pad(date.getUTCMonth() + 1)}-${pad(date.getUTCDate())}`
    + `T${pad(date.getUTCHours())}:${pad(date.getUTCMinutes())}:${pad(date.getUTCSeconds())}+00:00`;
}

export function newNonce() {
  const bytes = crypto.getRandomValues(new Uint8Array(24));
  return btoa(String.fromCharCode(...bytes)).replaceAll("+", "-").replaceAll("/", "_");
}

/** The per-day, per-host key (hex) derived from a secret key. */
export async function deriveKey(secretKey, day, host) {
  const kDate = await hmac(encoder.encode(secretKey), day);
  return hex(await hmac(new Uint8Array(kDate), host.toLowerCase()));
}

/** The three headers that sign one request with a derived key. */
export async function signedHeaders({
  accessKey, key, method, pathWithQuery, host, contentType = "", body = "", now = new Date(),
}) {
  const date = formatDate(now);
  const nonce = newNonce();
  const bodyHash = hex(await crypto.subtle.digest("SHA-256", encoder.encode(body)));
  const text = [
    method.toUpperCase(),
    pathWithQuery,
    date,
    `host:${host.toLowerCase()}`,
    `content-type:${contentType.toLowerCase()}`,
    `x-jetyard-nonce:${nonce}`,
    bodyHash,
  ].join("\n");
  const signature = hex(await hmac(unhex(key), text));
  return {
    Authorization: `Jetyard signMethod=HMAC-SHA256, credential=${accessKey}:${signature}`,
    "X-Jetyard-Date": date,
    "X-Jetyard-Nonce": nonce,
  };
}
