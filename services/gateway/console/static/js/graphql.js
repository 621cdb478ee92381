// One GraphQL request over HTTP, and the error every failure becomes. No credentials here:
// api.js adds them.

export const GRAPHQL_PATH = "/graphql";

/** A refusal or failure, carrying the gateway's errors ({message, extensions: {code}}). */
export class GraphQLFailure extends Error {
  constructor(errors, { status = 200, data = null } = {}) {
    super(errors.map((e) => e.message).join("; "));
    this.name = "GraphQLFailure";
    this.errors = errors;
    this.status = status;
    this.data = data;
  }

  get code() {
    return this.errors[0]?.extensions?.code ?? "error";
  }
}

export function failure(code, message) {
  return new GraphQLFailure([{ message, extensions: { code } }]);
}

/** POST a query; the data, or a GraphQLFailure with every error the gateway gave. */
export async function post(query, variables = {}, headers = {}) {
  const body = JSON.stringify({ query, variables });
  return postBody(body, headers);
}

export async function postBody(body, headers = {}) {
  let response;
  try {
    response = await fetch(GRAPHQL_PATH, {
      method: "POST",
      headers: { "content-type": "application/json", ...headers },
      body,
    });
  } catch (error) {
    throw failure("unavailable", `the gateway did not answer (${error.message})`);
  }
  let payload;
  try {
    payload = await response.json();
  } catch {
    throw new GraphQLFailure(
      [{ message: `the gateway answered HTTP ${response.status} without JSON`,
        extensions: { code: "bad-answer" } }],
      { status: response.status },
    );
  }
  if (payload.errors?.length) {
    throw new GraphQLFailure(payload.errors, { status: response.status, data: payload.data });
  }
  return payload.data;
}
