// Words and numbers the operator pages share: GPU amounts, ordinals, the colour a session
// keeps on every page, and what the signed-in role may do.

/** 250 hundredths -> "2.5"; 100 -> "1". */
export function gpuAmount(hundredths) {
  return String(Math.round(hundredths) / 100);
}

/** A decimal string ("2.5") as hundredths (250). */
export function hundredths(decimal) {
  return Math.round(Number(decimal) * 100);
}

export function ordinal(n) {
  const tens = n % 100;
  const suffix = tens >= 11 && tens <= 13 ? "th" : { 1: "st", 2: "nd", 3: "rd" }[n % 10] ?? "th";
  return `${n}${suffix}`;
}

/** A steady colour per session id, so one session looks the same on every GPU and page. */
export function colourOf(id) {
  let hash = 0;
  for (const ch of String(id)) hash = (hash * 31 + ch.charCodeAt(0)) >>> 0;
  return `hsl(${hash % 360} 62% 48%)`;
}

export const OTHER_DOMAIN = "another domain's session";

/** Cordon, drain and uncordon are the cluster administrators' (superadmins). */
export function mayOperateNodes(viewer) {
  return viewer.role === "superadmin";
}

export const OPERATORS = ["superadmin", "admin", "monitor"];
export const AUDITORS = ["superadmin", "admin", "superauditor", "auditor"];
