// A project's orchestrator as the page reads it: the Session the project reconciler keeps for
// `Project.spec.orchestrator` (`spec.role: orchestrator`, named `<project>-orchestrator`), the
// workers it spawned (label `ao.dev/orchestrator`), and the figures its overview card and the
// project's panel show. Pure functions, checked by test/orchestrator.test.mjs.

/** The label on a worker an orchestrator spawned: the orchestrator Session's name. */
export const ORCHESTRATOR_LABEL = 'ao.dev/orchestrator';
/** Workers an orchestrator may have alive when `limits.maxSessions` is absent. */
export const DEFAULT_MAX_SESSIONS = 5;
/** Phases of a worker that no longer counts against `maxSessions`. */
const FINISHED = new Set(['Merged', 'Closed', 'Failed']);

/** Whether `session` is a project's orchestrator. */
export function isOrchestrator(session) {
  return session?.spec?.role === 'orchestrator';
}

/** The name of the orchestrator that spawned `session` (its label), or null. */
export function orchestratorOf(session) {
  const o = session?.metadata?.labels?.[ORCHESTRATOR_LABEL];
  return typeof o === 'string' && o ? o : null;
}

/**
 * The orchestrator Session of project `projectName` among `sessions` (any iterable), or null: the
 * one named `<project>-orchestrator`, else any of the project's sessions in that role.
 */
export function orchestratorFor(projectName, sessions) {
  if (!projectName) return null;
  let found = null;
  for (const s of sessions ?? []) {
    if (!isOrchestrator(s) || s.spec?.project !== projectName) continue;
    if (s.metadata?.name === `${projectName}-orchestrator`) return s;
    found ??= s;
  }
  return found;
}

/** The sessions among `sessions` that orchestrator `name` spawned. */
export function workersOf(name, sessions) {
  return [...(sessions ?? [])].filter((s) => name && orchestratorOf(s) === name);
}

/**
 * Whether a worker counts against its orchestrator's `maxSessions`, as the controller counts it:
 * not merged, closed or failed, and not being deleted. A stopped worker counts: it can be resumed.
 */
export function isAlive(worker) {
  return !worker?.metadata?.deletionTimestamp && !FINISHED.has(worker?.status?.phase);
}

/** `limits.maxSessions` of the project's orchestrator, or its default. */
export function maxSessionsOf(project) {
  const n = project?.spec?.orchestrator?.limits?.maxSessions;
  return typeof n === 'number' ? n : DEFAULT_MAX_SESSIONS;
}

/**
 * What the overview's card and the project's panel say of orchestrator `orch`: its name and
 * project, its activity (`{state, evidence, since}` or null), its alive workers among `sessions`
 * against `maxSessions`, the batches of its workers' reports it got, and whether it is stopped
 * (what the project says, which the reconciler carries over to the Session).
 */
export function orchestratorSummary(orch, sessions, project) {
  const name = orch?.metadata?.name ?? '';
  const a = orch?.status?.activity;
  return {
    name,
    project: orch?.spec?.project ?? project?.metadata?.name ?? '',
    activity: a?.state ? { state: a.state, evidence: a.evidence ?? '', since: a.since ?? '' } : null,
    workers: workersOf(name, sessions).filter(isAlive).length,
    maxSessions: maxSessionsOf(project),
    batches: orch?.status?.orchestrator?.batches ?? 0,
    stopped: project?.spec?.orchestrator ? !!project.spec.orchestrator.stopped : !!orch?.spec?.stopped,
  };
}

/** `workers 2 / 5`: the alive workers against the limit, as the card and the panel word it. */
export function workersLine(summary) {
  return `workers ${summary.workers} / ${summary.maxSessions}`;
}

/**
 * The sessions of a project's page in their order: the orchestrator's workers first, then the
 * others, each part in `order`; the orchestrator itself is left out (its panel shows it).
 */
export function projectRows(sessions, orchName, order) {
  const rest = [...(sessions ?? [])].filter((s) => !isOrchestrator(s));
  const mine = rest.filter((s) => orchName && orchestratorOf(s) === orchName).sort(order);
  const others = rest.filter((s) => !(orchName && orchestratorOf(s) === orchName)).sort(order);
  return [...mine, ...others];
}
