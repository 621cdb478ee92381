// GraphQL as the signed-in person: every page's way to the gateway. A 401 (a token that
// expired or was revoked, a keypair deactivated) signs the console out and says why.

import * as auth from "./auth.js";
import { GraphQLFailure, postBody } from "./graphql.js";

export { GraphQLFailure } from "./graphql.js";

const CREDENTIAL_CODES = new Set(["bad-token", "unknown-keypair", "keypair-inactive"]);

/** The data of one query or mutation; throws GraphQLFailure with the gateway's errors. */
export async function gql(query, variables = {}) {
  const body = JSON.stringify({ query, variables });
  try {
    return await postBody(body, await auth.headersFor(body));
  } catch (error) {
    if (error instanceof GraphQLFailure && error.status === 401
        && CREDENTIAL_CODES.has(error.code)) {
      await auth.signOut(`Signed out: ${error.errors[0].message}`);
    }
    throw error;
  }
}

/** Like gql, but a field's error does not lose the others: {data, errors}. */
export async function gqlPartial(query, variables = {}) {
  try {
    return { data: await gql(query, variables), errors: [] };
  } catch (error) {
    if (error instanceof GraphQLFailure && error.data) {
      return { data: error.data, errors: error.errors };
    }
    throw error;
  }
}

let viewerCache = null;
auth.changes.addEventListener("change", () => { viewerCache = null; });

/** The signed-in person ({userId, role, domain, projects, accessKey}), asked once. */
export async function viewer() {
  viewerCache ??= gql("query Viewer { viewer { userId role domain projects accessKey } }")
    .then((data) => data.viewer)
    .catch((error) => { viewerCache = null; throw error; });
  return viewerCache;
}
