// How values read on the page: ages, token counts, dollars, the agent of a session, its branch or
// checkout, and the last event of each object. Pure functions, checked by test/format.test.mjs.

/** `12s`, `5m`, `3h`, `2d` since `time` (an RFC 3339 string) at `now` (milliseconds). */
export function age(time, now = Date.now()) {
  const t = Date.parse(time ?? '');
  if (Number.isNaN(t)) return '';
  const s = Math.max(0, Math.floor((now - t) / 1000));
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m`;
  if (s < 86400) return `${Math.floor(s / 3600)}h`;
  return `${Math.floor(s / 86400)}d`;
}

/** `950`, `12.3k`, `4.5M`. */
export function tokens(n) {
  const v = Number(n ?? 0);
  if (v < 1000) return String(v);
  if (v < 1e6) return `${(v / 1e3).toFixed(v < 1e4 ? 1 : 0)}k`;
  return `${(v / 1e6).toFixed(v < 1e7 ? 1 : 0)}M`;
}

/** `$1.50`, or an empty string when no cost is known. */
export function dollars(n) {
  return typeof n === 'number' ? `$${n.toFixed(2)}` : '';
}

/** The agent of a session as a person reads it: the adapter's name, or `custom: <program>`. */
export function agentOf(session, project) {
  const a = session?.spec?.agent ?? project?.spec?.defaults?.agent;
  if (!a) return 'claude-code';
  if (typeof a === 'string') return a;
  const program = (a.command ?? [])[0] ?? '';
  return `custom: ${program.split('/').pop()}`;
}

/** The branch a session works on: the one it has, else the one it will have. */
export function branchOf(session, project) {
  const st = session?.status?.workspace?.branch;
  if (st) return st;
  if (session?.spec?.branch) return session.spec.branch;
  const prefix = project?.spec?.sessionPrefix ?? session?.spec?.project ?? '';
  return `${prefix}/${session?.metadata?.name ?? ''}`;
}

/**
 * The kind of checkout a session has (`spec.workspace.kind`, else its project's default for
 * workers): `worktree`, `clone`, `readonly` or `none`. An orchestrator reads, by default.
 */
export function workspaceKindOf(session, project) {
  const kind = (w) => (typeof w === 'string' ? w : w?.kind);
  const own = kind(session?.spec?.workspace);
  if (own) return own;
  if (session?.spec?.role === 'orchestrator') return 'readonly';
  return kind(project?.spec?.defaults?.workspace) ?? 'worktree';
}

/** Whether a session works on a branch of its own (and so has a diff, a pull request to merge). */
export function hasBranch(session, project) {
  const k = workspaceKindOf(session, project);
  return k === 'worktree' || k === 'clone';
}

/**
 * Where a session works, as a person reads it: its branch, or for a branchless one
 * `readonly checkout at 1a2b3c4` (its head, once it has one) or `no checkout`.
 */
export function checkoutOf(session, project) {
  const kind = workspaceKindOf(session, project);
  if (kind === 'none') return 'no checkout';
  if (kind === 'readonly') {
    const sha = session?.status?.workspace?.headSha;
    return sha ? `readonly checkout at ${sha.slice(0, 7)}` : 'readonly checkout';
  }
  return branchOf(session, project);
}

/** The time an event last happened. */
export function eventTime(ev) {
  return ev?.lastTimestamp ?? ev?.firstTimestamp ?? ev?.metadata?.creationTimestamp ?? '';
}

/**
 * The newest event about each object, keyed `Kind/name`, from an iterable of events.
 */
export function latestEvents(events) {
  const latest = new Map();
  for (const ev of events) {
    const o = ev?.involvedObject;
    if (!o) continue;
    const key = `${o.kind}/${o.name}`;
    const seen = latest.get(key);
    if (!seen || eventTime(seen) <= eventTime(ev)) latest.set(key, ev);
  }
  return latest;
}

/** Whether `url` may be a link's target: http or https only, so no `javascript:` runs. */
export function safeUrl(url) {
  try {
    const u = new URL(url);
    return u.protocol === 'https:' || u.protocol === 'http:' ? u.href : null;
  } catch {
    return null;
  }
}

/** Splits a command line into words: spaces separate, single or double quotes group. */
export function splitCommand(line) {
  const words = [];
  let word = null;
  let quote = null;
  for (const c of line ?? '') {
    if (quote) {
      if (c === quote) quote = null;
      else word += c;
    } else if (c === '"' || c === "'") {
      quote = c;
      word = word ?? '';
    } else if (/\s/.test(c)) {
      if (word !== null) words.push(word);
      word = null;
    } else {
      word = (word ?? '') + c;
    }
  }
  if (word !== null) words.push(word);
  return words;
}

/** The question a session's agent asked a person (`ask_human`) and when, or `null` when none waits. */
export function questionOf(session) {
  const q = session?.status?.agent?.question;
  return q && typeof q.text === 'string' && q.text.trim() ? { text: q.text, askedAt: q.askedAt } : null;
}
