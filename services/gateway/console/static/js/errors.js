// How a page says that something failed: every error the gateway gave, with its code
// (docs/api.md "GraphQL error codes"), in one box.

import { h } from "./dom.js";
import { GraphQLFailure } from "./graphql.js";

// Said after the gateway's own sentence only where that sentence may not say what to do.
const HINTS = {
  unavailable: "The cluster could not be reached; try again shortly.",
  "rate-limited": "Too many requests; wait a moment.",
  internal: "A bug: the message carries the incident id in the gateway's log.",
};

export function errorBox(error, title = "That did not work") {
  const errors = error instanceof GraphQLFailure || Array.isArray(error?.errors)
    ? error.errors
    : [{ message: error?.message ?? String(error), extensions: { code: "error" } }];
  return h(
    "div",
    { class: "error-box", role: "alert" },
    h("strong", {}, title),
    h(
      "ul",
      {},
      errors.map((e) => {
        const code = e.extensions?.code ?? "error";
        return h(
          "li",
          {},
          code !== "error" && [h("code", { class: "error-code" }, code), " "],
          h("span", { class: "error-message" }, e.message),
          HINTS[code] ? h("span", { class: "hint" }, ` ${HINTS[code]}`) : null,
        );
      }),
    ),
  );
}
