// Signing in: email and password (a login token), or an access key and secret key (each
// request signed in the browser; only the day's derived key is kept).

import * as auth from "../auth.js";
import { h, replace } from "../dom.js";
import { errorBox } from "../errors.js";
import { definePage, navigate } from "../router.js";
import * as signing from "../signing.js";

function field(label, input, hint = null) {
  return h("label", { class: "field" }, h("span", { class: "label" }, label), input, hint && h("span", { class: "hint" }, hint));
}

function form(id, fields, submitLabel, act, problems) {
  const button = h("button", { type: "submit", class: "primary" }, submitLabel);
  return h(
    "form",
    {
      id,
      class: "stack",
      onsubmit: async (event) => {
        event.preventDefault();
        button.disabled = true;
        replace(problems);
        try {
          await act(new FormData(event.target));
        } catch (error) {
          replace(problems, errorBox(error, "Not signed in"));
        } finally {
          button.disabled = false;
        }
      },
    },
    fields,
    h("div", { class: "actions" }, button),
  );
}

definePage({
  path: "/sign-in",
  title: "Sign in",
  public: true,
  render({ root, query }) {
    const next = query.get("next") || "/sessions";
    const done = () => navigate(next.startsWith("/") && !next.startsWith("/sign-in") ? next : "/sessions");
    if (auth.current() !== null) {
      done();
      return;
    }
    const problems = h("div", { class: "problems" });
    const notice = auth.takeNotice();
    const byPassword = form(
      "sign-in-password",
      [
        field("Email", h("input", { name: "email", type: "email", autocomplete: "username", required: true, autofocus: true })),
        field("Password", h("input", { name: "password", type: "password", autocomplete: "current-password", required: true })),
      ],
      "Sign in",
      async (data) => {
        await auth.signIn(String(data.get("email")).trim(), String(data.get("password")));
        done();
      },
      problems,
    );
    const byKeypair = form(
      "sign-in-keypair",
      [
        field("Access key", h("input", { name: "accessKey", autocomplete: "off", required: true, spellcheck: "false" })),
        field(
          "Secret key",
          h("input", { name: "secretKey", type: "password", autocomplete: "off", required: true }),
          "Requests are signed in this browser; the secret key is not sent or kept, only a key derived for this address and today (UTC).",
        ),
      ],
      "Sign in with keypair",
      async (data) => {
        await auth.signInWithKeypair(String(data.get("accessKey")).trim(), String(data.get("secretKey")).trim());
        done();
      },
      problems,
    );
    const keypairPart = signing.available()
      ? h("details", { class: "keypair" }, h("summary", {}, "Sign in with an access key instead"), byKeypair)
      : h("p", { class: "hint" }, "Keypair sign-in needs https (or 127.0.0.1/localhost) for the browser's WebCrypto.");
    replace(
      root,
      h(
        "section",
        { class: "sign-in card" },
        h("h1", {}, "Sign in to Jetyard"),
        notice && h("p", { class: "notice", role: "status" }, notice),
        problems,
        byPassword,
        keypairPart,
      ),
    );
  },
});
