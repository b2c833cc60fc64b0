// What a session needs from a person, from its status alone: the overview's groups, in the order
// they are shown, and the document title that counts them. Pure functions, no DOM, so that
// node:test checks them (test/group.test.mjs); docs/dashboard.md explains each group. A project's
// orchestrator has a strip of its own above the groups and joins them only when it needs input.

import { isOrchestrator } from './orchestrator.js';

/** The groups, most urgent first; the first five need a person. */
export const GROUPS = [
  { key: 'needs-input', label: 'needs input', title: 'Needs input', attention: true },
  { key: 'stuck', label: 'stuck', title: 'Stuck', attention: true },
  { key: 'ci-failed', label: 'CI failed', title: 'CI failed or escalated', attention: true },
  { key: 'changes-requested', label: 'changes requested', title: 'Changes requested', attention: true },
  { key: 'ready-to-merge', label: 'ready to merge', title: 'Ready to merge', attention: true },
  { key: 'working', label: 'working', title: 'Working', attention: false },
  { key: 'idle', label: 'idle', title: 'Idle', attention: false },
  { key: 'done', label: 'done', title: 'Done', attention: false },
];

const DONE_PHASES = new Set(['Merged', 'Closed', 'Terminating']);
const RESTING_PHASES = new Set(['Stopped', 'Queued', 'RateLimited']);
// Escalated reactions whose own group comes first or says it better.
const OWN_GROUP = new Set(['agent-needs-input', 'agent-stuck', 'agent-exited', 'changes-requested', 'approved-and-green']);

/** The keys of the session's reactions that escalated to a person, sorted. */
export function escalations(session) {
  const reactions = session?.status?.reactions ?? {};
  return Object.keys(reactions).filter((k) => reactions[k]?.escalated).sort();
}

/** The key of the group a session belongs to (one of GROUPS). */
export function groupOf(session) {
  const status = session?.status ?? {};
  const phase = status.phase ?? 'Pending';
  const activity = status.activity?.state;
  const pr = status.pullRequest;
  const escalated = new Set(escalations(session));

  if (session?.metadata?.deletionTimestamp || DONE_PHASES.has(phase)) return 'done';
  if (pr && (pr.state === 'merged' || pr.state === 'closed')) return 'done';
  // A person stopped it, it waits for a slot, or for its usage limit: nothing to do now.
  if (session?.spec?.stopped || RESTING_PHASES.has(phase)) return 'idle';

  if (activity === 'needs-input' || phase === 'NeedsInput' || escalated.has('agent-needs-input')) {
    return 'needs-input';
  }
  if (
    activity === 'stuck' ||
    activity === 'exited' ||
    phase === 'Stuck' ||
    phase === 'Failed' ||
    escalated.has('agent-stuck') ||
    escalated.has('agent-exited')
  ) {
    return 'stuck';
  }
  const otherEscalation = [...escalated].some((k) => !OWN_GROUP.has(k));
  if (phase === 'CIFailed' || (pr && pr.checks === 'failing') || otherEscalation) return 'ci-failed';
  if (phase === 'ChangesRequested' || (pr && pr.review === 'changes-requested') || escalated.has('changes-requested')) {
    return 'changes-requested';
  }
  if (phase === 'Mergeable') return 'ready-to-merge';
  if (pr && pr.state === 'open' && pr.review === 'approved' && pr.checks !== 'pending' && pr.mergeable !== false) {
    return 'ready-to-merge';
  }
  if (phase === 'Idle' || activity === 'idle') return 'idle';
  return 'working';
}

/**
 * The group whose rows show `session` on the overview, or null for none: its group, except that
 * a project's orchestrator, shown in the overview's strip of orchestrators, is in a group only
 * while it needs input (a person answers it there like any agent).
 */
export function overviewGroupOf(session) {
  const group = groupOf(session);
  return isOrchestrator(session) && group !== 'needs-input' ? null : group;
}

/** Counts of the overview's rows by group key, every group present. */
export function countGroups(sessions) {
  const counts = Object.fromEntries(GROUPS.map((g) => [g.key, 0]));
  for (const s of sessions) {
    const group = overviewGroupOf(s);
    if (group) counts[group] += 1;
  }
  return counts;
}

/**
 * The document title for these counts: `aoctl` when there are no sessions, else
 * `(N) aoctl — ` (N, the sessions that need a person, left out when 0) and `COUNT label` for each
 * non-empty group, e.g. `(2) aoctl — 1 needs input, 1 CI failed, 3 working`.
 */
export function titleFor(counts) {
  const parts = GROUPS.filter((g) => (counts[g.key] ?? 0) > 0).map((g) => `${counts[g.key]} ${g.label}`);
  if (parts.length === 0) return 'aoctl';
  const attention = GROUPS.filter((g) => g.attention).reduce((n, g) => n + (counts[g.key] ?? 0), 0);
  return `${attention > 0 ? `(${attention}) ` : ''}aoctl — ${parts.join(', ')}`;
}
