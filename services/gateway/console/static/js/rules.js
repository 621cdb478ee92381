// The checks the gateway makes on createSession, made in the browser before sending, so a
// form can say what is wrong next to the field. The numbers and patterns come from the
// gateway (/console/rules.json, built from schemas/bounds.py, schemas/session.py and
// schemas/vfolder.py); the logic mirrors services/gateway/sessions/inputs.py. The gateway checks again
// and its answer is the last word: the form shows it when it refuses.

let loaded = null;

export function loadRules() {
  loaded ??= fetch("rules.json").then((r) => {
    if (!r.ok) throw new Error(`rules.json: HTTP ${r.status}`);
    return r.json();
  }).catch((error) => { loaded = null; throw error; });
  return loaded;
}

const NUMBER = /^[0-9]+(?:\.[0-9]+)?$/;
const SIZE = /^([0-9]+(?:\.[0-9]+)?)([kmgtKMGT]?)(?:[iI]?[bB])?$/;
const UNITS = { "": 1n, k: 1n << 10n, m: 1n << 20n, g: 1n << 30n, t: 1n << 40n };
// Python's str.strip(): whitespace at both ends (JS trim() knows the same characters).
const strip = (text) => text.trim();
const shown = (text) => JSON.stringify(text.length <= 40 ? text : `${text.slice(0, 37)}...`);

class Problem extends Error {}

/** A plain decimal as [whole digits, fraction digits without trailing zeros]. */
function decimal(what, text, rules) {
  const cleaned = strip(text);
  if (cleaned.startsWith("-") && NUMBER.test(cleaned.slice(1))) {
    throw new Problem(`${what} must not be negative, got ${shown(text)}`);
  }
  if (cleaned.length > rules.digitsMax || !NUMBER.test(cleaned)) {
    throw new Problem(`${what} ${shown(text)} is not a plain number: write digits 0-9 with at most one decimal point, e.g. 2 or 0.5`);
  }
  const [whole, fraction = ""] = cleaned.split(".");
  return [whole, fraction.replace(/0+$/, "")];
}

/** Cores as text -> milli-CPU (BigInt), or a Problem. */
export function cpuMilli(text, rules) {
  const [whole, fraction] = decimal("cpu", text, rules);
  if (fraction.length > 3) throw new Problem(`cpu ${shown(text)} is finer than 0.001 of a core`);
  const milli = BigInt(whole + fraction.padEnd(3, "0"));
  if (milli < BigInt(rules.cpu.minMilli)) throw new Problem(`cpu ${shown(text)} is below the least a container can be given: 0.01 of a core`);
  if (milli > BigInt(rules.cpu.maxMilli)) throw new Problem(`cpu ${shown(text)} is above the most one kernel may ask for: ${rules.cpu.maxMilli / 1000} cores`);
  return milli;
}

/** A size ("512m", "2g", bytes) -> bytes (BigInt), at least Docker's 6 MiB. */
export function memoryBytes(text, rules) {
  const cleaned = strip(text);
  if (cleaned.startsWith("-") && SIZE.test(cleaned.slice(1))) throw new Problem(`memory must not be negative, got ${shown(text)}`);
  const match = cleaned.length <= rules.digitsMax ? SIZE.exec(cleaned) : null;
  if (match === null) throw new Problem(`memory ${shown(text)} is not a size: write digits 0-9 with an optional unit k, m, g or t (powers of 1024), e.g. 512m or 2g`);
  const [whole, fraction = ""] = match[1].split(".");
  const unit = UNITS[match[2].toLowerCase()];
  const scale = 10n ** BigInt(fraction.length);
  const amount = BigInt(whole) * unit + (BigInt(fraction || "0") * unit) / scale;
  if (amount < BigInt(rules.memory.minBytes)) throw new Problem(`memory ${shown(text)} is below the least a container can be given: 6 MiB`);
  if (amount > BigInt(rules.memory.maxBytes)) throw new Problem(`memory ${shown(text)} is above the most one kernel may ask for`);
  return amount;
}

/** Devices -> hundredths (BigInt): 0 or steps of 0.01. */
export function gpuHundredths(text, rules) {
  const [whole, fraction] = decimal("gpu", text, rules);
  if (fraction.length > 2) throw new Problem(`gpu ${shown(text)} is finer than a share allows: GPUs are given in steps of 0.01 of a device`);
  const hundredths = BigInt(whole + fraction.padEnd(2, "0"));
  if (hundredths > BigInt(rules.gpu.maxHundredths)) throw new Problem(`gpu ${shown(text)} is above the most one kernel may ask for: ${rules.gpu.maxHundredths / 100} devices`);
  return hundredths;
}

function controlCharacter(value) {
  for (const char of value) {
    const code = char.codePointAt(0);
    if (code < 0x20 || (code >= 0x7f && code < 0xa0) || code === 0x2028 || code === 0x2029) {
      return `U+${code.toString(16).toUpperCase().padStart(4, "0")}`;
    }
  }
  return null;
}

function checkText(what, value, rules, { lines = false } = {}) {
  const length = [...value].length;
  if (length > rules.text.maxLength) throw new Problem(`${what} is ${length} characters long; the most is ${rules.text.maxLength}`);
  const bad = controlCharacter(lines ? value.replace(/[\n\t]/g, "") : value);
  if (bad !== null) throw new Problem(`${what} contains a control character (${bad}): only printable text is accepted`);
}

/** Why `path` cannot be a mount path, or null (schemas/vfolder.py mount_path_problem). */
export function mountPathProblem(path, rules) {
  const m = rules.mounts;
  if ([...path].length > m.maxPath) return `a mount path is at most ${m.maxPath} characters`;
  if (!new RegExp(m.pathPattern).test(path)) return `mount path ${shown(path)} must be absolute and made of A-Z, a-z, 0-9, '.', '_', '-' and '/'`;
  if (normpath(path) !== path || path.includes("//")) return `mount path ${shown(path)} is not normal (no '.', '..', '//' or trailing '/')`;
  for (const reserved of m.reserved) {
    if (path === reserved || (reserved !== "/" && path.startsWith(`${reserved}/`))) return `mount path ${shown(path)} is a system directory (or inside one)`;
  }
  return null;
}

/** posixpath.normpath for an absolute path. */
function normpath(path) {
  const parts = [];
  for (const part of path.split("/")) {
    if (part === "" || part === ".") continue;
    if (part === "..") parts.pop();
    else parts.push(part);
  }
  // POSIX keeps exactly two leading slashes; mountPathProblem refuses "//" anyway.
  return `/${parts.join("/")}`;
}

/**
 * Every problem with a createSession input (GraphQL's shape: cpu, memory, gpu as text,
 * clusterSize, command words, env [{name, value}], mounts [{folder, path, readOnly}]),
 * as [{field, message}]. `image`: the registered image's bounds, when it has any.
 */
export function checkSession(input, rules, image = null) {
  const problems = [];
  const attempt = (field, check) => {
    try {
      return check();
    } catch (error) {
      if (!(error instanceof Problem)) throw error;
      problems.push({ field, message: error.message });
      return null;
    }
  };
  const cpu = attempt("cpu", () => cpuMilli(input.cpu, rules));
  const memory = attempt("memory", () => memoryBytes(input.memory, rules));
  const gpu = attempt("gpu", () => gpuHundredths(input.gpu, rules));
  if (!["interactive", "batch"].includes(input.type)) problems.push({ field: "type", message: `type must be interactive or batch, got ${shown(input.type)}` });
  const batch = input.type === "batch";
  if (input.timeoutSeconds !== null && input.timeoutSeconds !== undefined) {
    if (!batch) problems.push({ field: "timeoutSeconds", message: "timeoutSeconds applies to batch sessions only (type: batch)" });
    else if (!Number.isInteger(input.timeoutSeconds) || input.timeoutSeconds < rules.timeoutSeconds.min || input.timeoutSeconds > rules.timeoutSeconds.max) {
      problems.push({ field: "timeoutSeconds", message: `timeoutSeconds must be ${rules.timeoutSeconds.min} to ${rules.timeoutSeconds.max} seconds` });
    }
  }
  const size = input.clusterSize ?? 1;
  if (!Number.isInteger(size) || size < 1 || size > rules.clusterSize.max) problems.push({ field: "clusterSize", message: `clusterSize must be 1 to ${rules.clusterSize.max} kernels, got ${size}` });
  const after = input.dependsOn ?? [];
  if (after.length > rules.dependsOn.max) problems.push({ field: "dependsOn", message: `at most ${rules.dependsOn.max} dependencies, got ${after.length}` });
  for (const [i, id] of after.entries()) {
    if (!new RegExp(rules.dependsOn.pattern).test(id)) problems.push({ field: "dependsOn", message: `dependency ${shown(id)} is not a session id: use 1 to 64 characters of A-Z, a-z, 0-9, '_' or '-'` });
    else if (after.indexOf(id) !== i) problems.push({ field: "dependsOn", message: `dependency ${shown(id)} is named more than once` });
  }
  const mounts = input.mounts ?? [];
  if (mounts.length > rules.mounts.max) problems.push({ field: "mounts", message: `at most ${rules.mounts.max} mounts, got ${mounts.length}` });
  const paths = [];
  const folders = [];
  for (const mount of mounts) {
    if (folders.includes(mount.folder)) problems.push({ field: "mounts", message: `folder ${shown(mount.folder)} is mounted more than once` });
    folders.push(mount.folder);
    if (mount.path === null || mount.path === undefined) continue;
    const problem = mountPathProblem(mount.path, rules);
    if (problem) problems.push({ field: "mounts", message: `mounts: ${problem}` });
    else if (paths.includes(mount.path)) problems.push({ field: "mounts", message: `two mounts at ${mount.path}: give each folder its own path` });
    paths.push(mount.path);
  }
  const imageName = input.image ?? "";
  if (imageName.length < 1 || [...imageName].length > rules.image.maxLength || !new RegExp(rules.image.pattern).test(imageName)) {
    problems.push({ field: "image", message: `image ${shown(imageName)} is not an image name (letters, digits and . _ / : @ -)` });
  } else {
    attempt("image", () => checkText("image", imageName, rules));
  }
  if (input.name !== null && input.name !== undefined && (input.name.length > rules.name.maxLength || !new RegExp(rules.name.pattern).test(input.name))) {
    problems.push({ field: "name", message: `name must be 1 to ${rules.name.maxLength} of A-Z, a-z, 0-9, '_', '.' and '-'` });
  }
  if (input.resourceGroup && !new RegExp(rules.resourceGroup.pattern).test(input.resourceGroup)) problems.push({ field: "resourceGroup", message: "a resource group's name is 1 to 64 of A-Z, a-z, 0-9, '_' and '-'" });
  const words = input.command ?? [];
  if (words.length > rules.command.maxWords) problems.push({ field: "command", message: `the command has more than ${rules.command.maxWords} words` });
  for (const word of words) attempt("command", () => checkText("a command word", word, rules, { lines: true }));
  const env = input.env ?? [];
  const names = new Set(env.map((e) => e.name));
  if (names.size > rules.env.max) problems.push({ field: "env", message: `more than ${rules.env.max} environment variables` });
  for (const { name, value } of env) {
    if (!new RegExp(rules.env.namePattern).test(name)) problems.push({ field: "env", message: `environment variable name ${shown(name)} is not valid: start with a letter (A-Z, a-z) or '_', then letters, digits 0-9 or '_'` });
    else attempt("env", () => checkText(`environment variable ${name}`, value, rules, { lines: true }));
  }
  if (image !== null) problems.push(...imageBounds(image, { cpu, memory, gpu }));
  return problems;
}

/** A registered image's minimum and maximum per kernel (the scheduler refuses outside them). */
function imageBounds(image, asked) {
  const problems = [];
  const slots = [
    ["cpu", asked.cpu, (v) => BigInt(Math.round(Number(v) * 1000)), image.minResources.cpu, image.maxResources.cpu, (v) => `${v} cores`],
    ["memory", asked.memory, (v) => BigInt(v), image.minResources.memoryBytes, image.maxResources.memoryBytes, (v) => `${v} bytes`],
    ["gpu", asked.gpu, (v) => BigInt(Math.round(Number(v) * 100)), image.minResources.gpu, image.maxResources.gpu, (v) => `${v} GPU`],
  ];
  for (const [field, value, scaled, least, most, words] of slots) {
    if (value === null) continue; // not a valid amount: said already
    if (least !== null && least !== undefined && value < scaled(least)) problems.push({ field, message: `${image.name} needs at least ${words(least)} per kernel` });
    if (most !== null && most !== undefined && value > scaled(most)) problems.push({ field, message: `${image.name} allows at most ${words(most)} per kernel` });
  }
  return problems;
}

/** "python train.py --lr '0.1 x'" -> ["python", "train.py", "--lr", "0.1 x"] (sh-like quotes). */
export function splitWords(line) {
  const words = [];
  let word = null;
  let quote = null;
  for (let i = 0; i < line.length; i += 1) {
    const c = line[i];
    if (quote) {
      if (c === quote) quote = null;
      else if (c === "\\" && quote === '"' && i + 1 < line.length) word += line[++i];
      else word += c;
    } else if (c === "'" || c === '"') {
      quote = c;
      word ??= "";
    } else if (c === "\\" && i + 1 < line.length) {
      word = (word ?? "") + line[++i];
    } else if (/\s/.test(c)) {
      if (word !== null) words.push(word);
      word = null;
    } else {
      word = (word ?? "") + c;
    }
  }
  if (quote) throw new Problem(`the command has an unclosed ${quote} quote`);
  if (word !== null) words.push(word);
  return words;
}

export { Problem };
