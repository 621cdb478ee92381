// A folder's files through the storage data plane: vfolderAccess grants one operation on one
// path (docs/vfolders.md); answers the page must read go through the gateway's same-origin
// relay (/console/storage/...), downloads straight to the data plane as a link.

import { gql } from "./api.js";
import { failure } from "./graphql.js";

const ACCESS = `mutation FolderAccess($id: String!, $operation: String!, $path: String!, $size: Float) {
  vfolderAccess(id: $id, operation: $operation, path: $path, size: $size) { url token maxBytes }
}`;
const RELAY = "/console/storage";
export const CHUNK_BYTES = 4 << 20;

export async function grant(folderId, operation, path, size = null) {
  return (await gql(ACCESS, { id: folderId, operation, path, size })).vfolderAccess;
}

function relayed(url) {
  const target = new URL(url);
  return `${RELAY}${target.pathname}`;
}

async function call(url, init) {
  let response;
  try {
    response = await fetch(url, init);
  } catch (error) {
    throw failure("unavailable", `the storage service did not answer (${error.message})`);
  }
  if (!response.ok) {
    let body = {};
    try {
      body = await response.json();
    } catch {
      // an answer without JSON: the status says enough
    }
    const error = failure(body.error ?? `http-${response.status}`, body.message ?? `the storage service answered HTTP ${response.status}`);
    error.status = response.status;
    throw error;
  }
  return response;
}

const bearer = (token) => ({ Authorization: `Bearer ${token}` });

/** Every entry of a directory ({name, type, size, mtime}), following the data plane's pages. */
export async function list(folderId, path) {
  const access = await grant(folderId, "list", path);
  const entries = [];
  let after = null;
  for (let page = 0; page < 50; page += 1) {
    const query = after === null ? "" : `?after=${encodeURIComponent(after)}`;
    const body = await (await call(`${relayed(access.url)}${query}`, { headers: bearer(access.token) })).json();
    entries.push(...body.entries);
    if (!body.more) return { entries, complete: true };
    after = body.next_after;
  }
  return { entries, complete: false };
}

/** The link that downloads one file (its token in the query: a plain link, no script). */
export async function downloadUrl(folderId, path) {
  const access = await grant(folderId, "download", path);
  const url = new URL(access.url);
  url.searchParams.set("token", access.token);
  return url.href;
}

export async function makeDirectory(folderId, path) {
  const access = await grant(folderId, "mkdir", path);
  await call(relayed(access.url), {
    method: "POST", headers: { ...bearer(access.token), "content-type": "application/json" }, body: JSON.stringify({ parents: true }),
  });
}

export async function remove(folderId, path) {
  const access = await grant(folderId, "delete", path);
  await call(relayed(access.url), {
    method: "POST", headers: { ...bearer(access.token), "content-type": "application/json" }, body: JSON.stringify({ recursive: true }),
  });
}

/**
 * Upload one File to `path` (tus 1.0: create, then PATCH chunks). progress(sentBytes).
 * A token that expires midway is replaced by a fresh one for the same path.
 */
export async function upload(folderId, path, file, progress = () => {}) {
  let access = await grant(folderId, "upload", path, file.size);
  const tus = (extra) => ({ ...bearer(access.token), "Tus-Resumable": "1.0.0", ...extra });
  const created = await call(relayed(access.url), { method: "POST", headers: tus({ "Upload-Length": String(file.size) }) });
  const location = created.headers.get("location");
  let offset = 0;
  progress(0);
  while (offset < file.size) {
    const chunk = file.slice(offset, offset + CHUNK_BYTES);
    try {
      const answer = await call(location, {
        method: "PATCH",
        headers: tus({ "Upload-Offset": String(offset), "Content-Type": "application/offset+octet-stream" }),
        body: chunk,
      });
      offset = Number(answer.headers.get("upload-offset") ?? offset + chunk.size);
    } catch (error) {
      if (error.status !== 401) throw error;
      access = await grant(folderId, "upload", path, file.size);
      const head = await call(location, { method: "HEAD", headers: tus({}) });
      offset = Number(head.headers.get("upload-offset"));
    }
    progress(offset);
  }
}
