// Who the console acts as: a login token (email and password) or a keypair, kept in
// sessionStorage for this tab only. For a keypair only the key derived for this host and
// this UTC day is kept (signing.js), so a keypair sign-in ends at midnight UTC.

import { GRAPHQL_PATH, failure, post, postBody } from "./graphql.js";
import * as signing from "./signing.js";

const STORE = "jetyard.console.credentials";
const NOTICE = "jetyard.console.notice";
export const changes = new EventTarget();

export function current() {
  try {
    return JSON.parse(sessionStorage.getItem(STORE) ?? "null");
  } catch {
    return null;
  }
}

function keep(credentials) {
  if (credentials === null) sessionStorage.removeItem(STORE);
  else sessionStorage.setItem(STORE, JSON.stringify(credentials));
  changes.dispatchEvent(new Event("change"));
}

/** Why the last sign-in ended (said once on the sign-in page). */
export function takeNotice() {
  const notice = sessionStorage.getItem(NOTICE);
  sessionStorage.removeItem(NOTICE);
  return notice;
}

export async function signIn(email, password) {
  const data = await post(
    "mutation SignIn($email: String!, $password: String!) { login(email: $email, password: $password) { token userId expiresInS } }",
    { email, password },
  );
  const { token, userId, expiresInS } = data.login;
  keep({ kind: "token", token, userId, email, expiresAt: Date.now() + expiresInS * 1000 });
}

export async function signInWithKeypair(accessKey, secretKey) {
  if (!signing.available()) {
    throw failure(
      "insecure-context",
      "signing with a keypair needs the browser's WebCrypto, which it offers only over https "
        + "or on 127.0.0.1/localhost: sign in with your email and password instead",
    );
  }
  const day = signing.utcDay(new Date());
  const key = await signing.deriveKey(secretKey, day, location.host);
  const credentials = { kind: "keypair", accessKey, day, host: location.host, key };
  // Proved before it is kept: a wrong secret is said here, not on the first page.
  const body = JSON.stringify({ query: "query SignedIn { viewer { userId } }", variables: {} });
  await postBody(body, await sign(credentials, "POST", body));
  keep(credentials);
}

/** Forget the credentials; a login token is also ended on the gateway. */
export async function signOut(notice = null) {
  const credentials = current();
  if (notice) sessionStorage.setItem(NOTICE, notice);
  keep(null);
  if (credentials?.kind === "token") {
    try {
      await post("mutation SignOut { logout }", {}, { Authorization: `Bearer ${credentials.token}` });
    } catch {
      // Gone already, or the gateway is away: the token expires by itself.
    }
  }
}

async function sign(credentials, method, body, contentType = "application/json", pathWithQuery = GRAPHQL_PATH) {
  if (credentials.kind === "token") {
    if (Date.now() >= credentials.expiresAt) {
      await signOut("Your sign-in has expired: sign in again.");
      throw failure("signed-out", "your sign-in has expired: sign in again");
    }
    return { Authorization: `Bearer ${credentials.token}` };
  }
  const now = new Date();
  if (signing.utcDay(now) !== credentials.day || credentials.host !== location.host) {
    await signOut("A keypair sign-in lasts until midnight UTC: sign in again.");
    throw failure("signed-out", "a keypair sign-in lasts until midnight UTC: sign in again");
  }
  return signing.signedHeaders({
    accessKey: credentials.accessKey,
    key: credentials.key,
    method,
    pathWithQuery,
    host: location.host,
    contentType,
    body,
    now,
  });
}

function signedIn() {
  const credentials = current();
  if (credentials === null) throw failure("signed-out", "sign in first");
  return credentials;
}

/** The headers that authenticate a POST of `body` to /graphql. */
export async function headersFor(body) {
  return sign(signedIn(), "POST", body);
}

/** The headers that authenticate a GET of `pathWithQuery` (no body) on the gateway. */
export async function headersForGet(pathWithQuery) {
  return sign(signedIn(), "GET", "", "", pathWithQuery);
}

/** connection_init's payload: the headers of a GET /graphql with no body, and the host. */
export async function connectionParams() {
  return { host: location.host, ...(await headersForGet(GRAPHQL_PATH)) };
}
