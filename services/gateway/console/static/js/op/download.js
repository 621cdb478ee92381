// An authenticated download from the gateway (the usage CSV): the GET is signed as the console
// signs its GraphQL requests (a login token, or the day's key derived from a keypair), the
// answer saved through a link the browser downloads. Nothing is sent anywhere else.

import * as auth from "../auth.js";
import { GraphQLFailure } from "../graphql.js";

function filenameOf(response, fallback) {
  const found = /filename="([^"]+)"/.exec(response.headers.get("content-disposition") ?? "");
  return found ? found[1] : fallback;
}

/** GET `pathWithQuery` from the gateway and save the answer as a file; its name, and its text. */
export async function download(pathWithQuery, fallbackName) {
  const response = await fetch(pathWithQuery, { headers: await auth.headersForGet(pathWithQuery) });
  if (!response.ok) {
    let errors = [{ message: `the gateway answered ${response.status}`, extensions: { code: "error" } }];
    try {
      errors = (await response.json()).errors ?? errors;
    } catch {
      // not JSON: the status says enough
    }
    throw new GraphQLFailure(errors, { status: response.status });
  }
  const blob = await response.blob();
  const name = filenameOf(response, fallbackName);
  const url = URL.createObjectURL(blob);
  const link = document.createElement("a");
  link.href = url;
  link.download = name;
  link.hidden = true;
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 60_000);
  return { name, text: await blob.text() };
}
