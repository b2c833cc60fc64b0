// The overview (`#/`): the projects' orchestrators in a strip of their own, then every other
// session, grouped by what it needs from a person, attention first; filtered by project and label
// selector in the page. A change to a session replaces its row alone, moving it to its new group
// when that changed; the strip is drawn again only when what it shows changed.

import { h, replace } from './dom.js';
import { GROUPS, groupOf, overviewGroupOf, escalations } from './group.js';
import { parseSelector, matches } from './labels.js';
import { age, agentOf, checkoutOf } from './format.js';
import { isOrchestrator, orchestratorOf, orchestratorSummary, workersLine } from './orchestrator.js';

/** The colour family of a phase; the phase's name is always shown beside it. */
export function toneOf(phase) {
  switch (phase) {
    case 'NeedsInput':
    case 'Stuck':
    case 'Failed':
    case 'CIFailed':
      return 'bad';
    case 'ChangesRequested':
    case 'RateLimited':
    case 'Queued':
      return 'warn';
    case 'Mergeable':
    case 'Approved':
    case 'Merged':
      return 'good';
    case 'Working':
    case 'Provisioning':
    case 'Pending':
    case 'PROpen':
      return 'busy';
    default:
      return 'quiet';
  }
}

const CHECKS = { passing: ['good', 'checks passing'], failing: ['bad', 'checks failing'], pending: ['busy', 'checks pending'], none: ['quiet', 'no checks'] };
const REVIEWS = {
  approved: ['good', 'approved'],
  'changes-requested': ['warn', 'changes requested'],
  pending: ['busy', 'review pending'],
  none: ['quiet', 'no review'],
};

/** A coloured label that always says what it means in words. */
export function chip(tone, text, attrs = {}) {
  return h('span', { class: `chip tone-${tone}`, ...attrs }, text);
}

export function phaseChip(session) {
  const phase = session.status?.phase ?? 'Pending';
  return chip(toneOf(phase), phase, { 'data-field': 'phase' });
}

/**
 * The PR of a session as chips: number, state, checks and review. `compact` (the rows) leaves out
 * the states that say nothing happened (no checks, no review).
 */
export function prChips(pr, compact = false) {
  if (!pr) return [h('span', { class: 'muted' }, 'no PR')];
  const [ct, cw] = CHECKS[pr.checks] ?? ['quiet', pr.checks];
  const [rt, rw] = REVIEWS[pr.review] ?? ['quiet', pr.review];
  const out = [h('span', { class: 'pr-number' }, `#${pr.number}`)];
  if (pr.state !== 'open') out.push(chip(pr.state === 'merged' ? 'good' : 'quiet', pr.state));
  if (!compact || pr.checks !== 'none') out.push(chip(ct, compact ? cw.replace('checks ', 'CI ') : cw, { 'data-checks': pr.checks }));
  if (!compact || pr.review !== 'none') out.push(chip(rt, rw, { 'data-review': pr.review }));
  if (pr.mergeable === false) out.push(chip('warn', 'conflicts'));
  return out;
}

/** The activity of a session and the evidence it was read from. */
export function activityOf(session) {
  const a = session.status?.activity;
  if (!a) return [h('span', { class: 'muted' }, '—')];
  const tone = { working: 'busy', idle: 'quiet', 'needs-input': 'bad', stuck: 'bad', exited: 'bad', 'rate-limited': 'warn' }[a.state] ?? 'quiet';
  return [
    chip(tone, a.state, { 'data-activity': a.state }),
    a.evidence ? h('span', { class: 'evidence', title: a.evidence }, a.evidence) : null,
  ];
}

/** The mark of a worker an orchestrator spawned: words, not only a colour. */
export function byOrchestratorChip(session) {
  const orch = orchestratorOf(session);
  return orch ? chip('busy', 'by orchestrator', { 'data-field': 'orchestrator', title: `spawned by ${orch}` }) : null;
}

/** One session as a row of the overview (and of a project's page). */
export function sessionRow(session, store) {
  const name = session.metadata.name;
  const project = store.projects.get(session.spec?.project);
  const ev = store.latestEvent(name);
  const escalated = escalations(session);
  const where = checkoutOf(session, project);
  return h(
    'a',
    { class: 'session', 'data-session': name, 'data-group': groupOf(session), href: `#/sessions/${encodeURIComponent(name)}` },
    h(
      'span',
      { class: 'cell who' },
      h('span', { class: 'name' }, name),
      h(
        'span',
        { class: 'agent' },
        byOrchestratorChip(session),
        isOrchestrator(session) ? chip('busy', 'orchestrator', { 'data-field': 'role' }) : null,
        h('span', { 'data-field': 'agent' }, agentOf(session, project)),
      ),
    ),
    h('span', { class: 'cell phase' }, phaseChip(session)),
    h(
      'span',
      { class: 'cell activity', 'data-field': 'activity' },
      activityOf(session),
      escalated.map((k) => chip('bad', `escalated: ${k}`)),
    ),
    h('span', { class: 'cell branch', 'data-field': 'branch', title: where }, where),
    h(
      'span',
      { class: 'cell pr', 'data-field': 'pr', 'data-checks': session.status?.pullRequest?.checks, 'data-review': session.status?.pullRequest?.review },
      prChips(session.status?.pullRequest, true),
    ),
    h(
      'span',
      { class: 'cell event', 'data-field': 'event', title: ev ? `${ev.reason}: ${ev.message}` : '' },
      ev ? [h('span', { class: `reason ${ev.type === 'Warning' ? 'warning' : ''}` }, ev.reason), ' ', ev.message] : h('span', { class: 'muted' }, 'no events'),
    ),
    h(
      'span',
      { class: 'cell age', 'data-field': 'age', 'data-time': session.metadata.creationTimestamp ?? '', title: session.metadata.creationTimestamp ?? '' },
      age(session.metadata.creationTimestamp),
    ),
  );
}

/** Newest first, then by name: a row keeps its place while it changes. */
export function byAge(a, b) {
  const ta = a.metadata.creationTimestamp ?? '';
  const tb = b.metadata.creationTimestamp ?? '';
  if (ta !== tb) return ta < tb ? 1 : -1;
  return a.metadata.name < b.metadata.name ? -1 : 1;
}

/** A card of the overview's strip: one project's orchestrator. */
export function orchestratorCard(orch, store) {
  const project = store.projects.get(orch.spec?.project);
  const sum = orchestratorSummary(orch, store.sessions.values(), project);
  const link = (path) => `#/${path}/${encodeURIComponent(path === 'sessions' ? sum.name : sum.project)}`;
  return h(
    'article',
    { class: 'orch-card', 'data-orchestrator': sum.name, 'data-project': sum.project, 'data-group': groupOf(orch) },
    h(
      'div',
      { class: 'orch-title' },
      h('a', { class: 'name', href: link('sessions'), 'data-field': 'name' }, sum.name),
      phaseChip(orch),
      sum.stopped && orch.status?.phase !== 'Stopped' ? chip('quiet', 'stopping', { 'data-field': 'stopped' }) : null,
    ),
    h('div', { class: 'activity-line', 'data-field': 'activity' }, activityOf(orch)),
    h(
      'div',
      { class: 'orch-facts' },
      h('span', { 'data-field': 'workers', title: 'its workers that are not merged, closed or failed, against limits.maxSessions' }, workersLine(sum)),
      h('a', { href: link('projects'), 'data-field': 'project' }, `project ${sum.project}`),
    ),
  );
}

/** What a card shows, as one string: the card is drawn again only when it changes. */
function cardKey(orch, store) {
  const project = store.projects.get(orch.spec?.project);
  const sum = orchestratorSummary(orch, store.sessions.values(), project);
  const a = orch.status?.activity;
  return JSON.stringify([sum, orch.status?.phase, a?.state, a?.evidence, groupOf(orch)]);
}

/** The filters the overview holds across visits. */
const filters = { project: '', labels: '' };

export class Overview {
  constructor(store) {
    this.store = store;
    this.rows = new Map();
  }

  mount(root) {
    const projectSelect = h('select', { name: 'project', 'aria-label': 'Project' }, h('option', { value: '' }, 'All projects'));
    this.projectSelect = projectSelect;
    const labels = h('input', {
      name: 'labels',
      type: 'search',
      placeholder: 'labels, e.g. team=web',
      autocomplete: 'off',
      spellcheck: 'false',
      'aria-label': 'Label selector',
      value: filters.labels,
    });
    this.labelsError = h('span', { class: 'filter-error', role: 'alert' });
    projectSelect.addEventListener('change', () => {
      filters.project = projectSelect.value;
      this.refilter();
    });
    labels.addEventListener('input', () => {
      filters.labels = labels.value;
      this.refilter();
    });
    this.labelsInput = labels;
    this.empty = h(
      'div',
      { class: 'empty', hidden: true },
      h('p', {}, 'No sessions to show.'),
      h('p', { class: 'muted' }, 'Start one with ', h('a', { href: '#/new' }, 'New session'), ' or ', h('code', {}, 'aoctl spawn --project NAME "prompt"'), '.'),
    );
    this.sections = new Map();
    const groups = GROUPS.map((g) => {
      const count = h('span', { class: 'count' }, '0');
      const list = h('div', { class: 'rows' });
      const section = h(
        'section',
        { class: `group group-${g.key}`, 'data-group': g.key, hidden: true, 'aria-label': g.title },
        h('h2', {}, h('span', { class: 'marker', 'aria-hidden': 'true' }), h('span', { class: 'group-title' }, g.title), count),
        list,
      );
      this.sections.set(g.key, { section, count, list });
      return section;
    });
    this.summary = h('div', { class: 'summary', 'aria-label': 'Sessions by group' });
    this.cards = h('div', { class: 'orch-cards' });
    this.strip = h(
      'section',
      { class: 'orchestrators', 'aria-label': 'Orchestrators', hidden: true },
      h('h2', {}, 'Orchestrators'),
      this.cards,
    );
    this.stripKey = null;
    replace(
      root,
      h(
        'div',
        { class: 'toolbar' },
        h('h1', {}, 'Sessions'),
        this.summary,
        h('div', { class: 'filters', role: 'search' }, projectSelect, h('span', { class: 'label-filter' }, labels, this.labelsError)),
      ),
      this.strip,
      h(
        'div',
        { class: 'columns', 'aria-hidden': 'true' },
        ['Session', 'Phase', 'Activity', 'Branch', 'Pull request', 'Last event', 'Age'].map((c) => h('span', {}, c)),
      ),
      groups,
      this.empty,
    );
    this.fillProjects();
    this.refilter();
    this.ticker = setInterval(() => this.tick(), 15000);
  }

  unmount() {
    clearInterval(this.ticker);
  }

  fillProjects() {
    const names = [...this.store.projects.keys()].sort();
    if (filters.project && !names.includes(filters.project)) names.push(filters.project);
    replace(this.projectSelect, h('option', { value: '' }, 'All projects'), names.map((n) => h('option', { value: n }, n)));
    this.projectSelect.value = filters.project;
  }

  /** Whether a session passes the filters. */
  shows(session) {
    if (filters.project && session.spec?.project !== filters.project) return false;
    return matches(this.requirements, session.metadata?.labels);
  }

  /** Whether a session has a row: it passes the filters and is in a group. */
  hasRow(session) {
    return this.shows(session) && overviewGroupOf(session) !== null;
  }

  /** The strip of orchestrators, by project, following the project filter; drawn again only when it changed. */
  renderStrip() {
    const orchs = [...this.store.sessions.values()]
      .filter((s) => isOrchestrator(s) && (!filters.project || s.spec?.project === filters.project))
      .sort((a, b) => ((a.spec?.project ?? '') < (b.spec?.project ?? '') ? -1 : 1));
    const key = orchs.map((o) => cardKey(o, this.store)).join('\n');
    if (key === this.stripKey) return;
    this.stripKey = key;
    replace(this.cards, orchs.map((o) => orchestratorCard(o, this.store)));
    this.strip.hidden = orchs.length === 0;
  }

  /** Rebuilds every row for new filters (or a new list). */
  refilter() {
    const parsed = parseSelector(filters.labels);
    this.requirements = parsed.requirements ?? [];
    this.labelsError.textContent = parsed.error ?? '';
    this.labelsInput.setAttribute('aria-invalid', parsed.error ? 'true' : 'false');
    for (const { list } of this.sections.values()) list.replaceChildren();
    this.rows.clear();
    const shown = [...this.store.sessions.values()].filter((s) => this.hasRow(s)).sort(byAge);
    for (const s of shown) this.place(s);
    this.recount();
    this.renderStrip();
  }

  /** Puts the row of `session` in its group, where its age sorts it. */
  place(session) {
    const row = sessionRow(session, this.store);
    const { list } = this.sections.get(overviewGroupOf(session));
    const before = [...list.children].find((el) => {
      const other = this.store.sessions.get(el.dataset.session);
      return other && byAge(session, other) < 0;
    });
    list.insertBefore(row, before ?? null);
    this.rows.set(session.metadata.name, row);
    return row;
  }

  recount() {
    let total = 0;
    const pills = [];
    for (const g of GROUPS) {
      const { section, count, list } = this.sections.get(g.key);
      const n = list.children.length;
      total += n;
      count.textContent = String(n);
      section.hidden = n === 0;
      section.dataset.count = String(n);
      if (n > 0) {
        pills.push(
          h(
            'button',
            { type: 'button', class: `pill group-${g.key}${g.attention ? ' attention' : ''}`, onclick: () => section.scrollIntoView({ behavior: 'smooth', block: 'start' }) },
            h('strong', {}, String(n)),
            ` ${g.label}`,
          ),
        );
      }
    }
    replace(this.summary, pills);
    this.empty.hidden = total > 0;
  }

  tick() {
    for (const el of this.rows.values()) {
      const cell = el.querySelector('[data-field=age]');
      if (cell) cell.textContent = age(cell.dataset.time);
    }
  }

  /** One change from the store. */
  update(change) {
    if (change.type === 'RESET' || (change.kind === 'projects' && change.type !== 'MODIFIED')) {
      if (change.kind === 'projects') this.fillProjects();
      this.refilter();
      return;
    }
    if (change.kind === 'projects') {
      this.renderStrip();
      return;
    }
    const name = change.kind === 'events' ? change.obj?.involvedObject?.name : change.obj?.metadata?.name;
    if (change.kind === 'events' && change.obj?.involvedObject?.kind !== 'Session') return;
    this.refresh(name);
    if (change.kind === 'sessions') this.renderStrip();
  }

  /** Re-renders the row of one session (or removes it), and the counts. */
  refresh(name) {
    const old = this.rows.get(name);
    const session = this.store.sessions.get(name);
    const show = session && this.hasRow(session);
    if (!show) {
      if (old) {
        old.remove();
        this.rows.delete(name);
        this.recount();
      }
      return;
    }
    if (old && old.dataset.group === overviewGroupOf(session)) {
      const row = sessionRow(session, this.store);
      old.replaceWith(row);
      this.rows.set(name, row);
      return;
    }
    old?.remove();
    const row = this.place(session);
    row.classList.add('moved');
    this.recount();
  }
}
