// A project's page (`#/projects/NAME`): its orchestrator, when it has one (its live transcript, a
// box to talk to it, its limits and workers, and Stop/Resume through the Project's
// `spec.orchestrator.stopped`), its sessions (the orchestrator's workers first), its pull requests,
// its queue (the sessions waiting in phase Queued, and why) and its budget against what its
// sessions used.

import { h, replace } from './dom.js';
import { age, checkoutOf, dollars, safeUrl, tokens } from './format.js';
import { activityOf, byAge, chip, phaseChip, prChips, sessionRow } from './overview.js';
import { maxSessionsOf, orchestratorFor, orchestratorOf, orchestratorSummary, projectRows } from './orchestrator.js';
import { followTranscript, sendText, setOrchestratorStopped } from './session.js';

/** A meter of `used` against `limit`, with the figures in words beside it. */
function budgetLine(label, used, limit, show) {
  const ratio = limit > 0 ? used / limit : 0;
  return h(
    'div',
    { class: 'budget-line' },
    h('span', { class: 'budget-label' }, label),
    h('meter', { min: '0', max: String(limit), value: String(Math.min(used, limit)), low: String(limit * 0.7), high: String(limit * 0.9), optimum: '0' }),
    h('span', { class: ratio >= 1 ? 'bad-text' : '' }, `${show(used)} of ${show(limit)}${ratio >= 1 ? ' — spent' : ''}`),
  );
}

/** The limits of an orchestrator (`spec.orchestrator.limits`) but the number of its workers, as lines of facts. */
export function limitFacts(spec) {
  const l = spec?.limits ?? {};
  return [
    ['Budget share', l.budgetPercent ? `${l.budgetPercent}% of the project's budget` : "the project's whole budget"],
    ['Merges', l.merge ? "may merge its workers' pull requests once approved and green" : 'no: a person merges'],
    ['Questions', l.answerQuestions ? "its workers' questions go to it" : "its workers' questions go to a person"],
  ];
}

export class ProjectPage {
  constructor(store, name) {
    this.store = store;
    this.name = name;
  }

  /** The orchestrator's panel, made once: what is typed in its box and its transcript survive renders. */
  orchestratorPanel() {
    this.orchHead = h('div', { class: 'orch-head' });
    this.orchFacts = h('dl', { class: 'facts', 'data-field': 'limits' });
    this.orchTranscript = h('pre', { id: 'orchestrator-transcript', class: 'transcript', tabindex: '0' }, 'No transcript yet.');
    const text = h('textarea', { name: 'text', rows: '3', required: true, placeholder: 'A goal, or a word for the orchestrator', 'aria-label': 'Message to the orchestrator' });
    this.talk = h(
      'form',
      { id: 'talk', class: 'send' },
      text,
      h('div', { class: 'form-actions' }, h('button', { type: 'submit', class: 'primary' }, 'Send'), h('span', { class: 'hint muted' }, 'Ctrl+Enter sends')),
    );
    text.addEventListener('keydown', (e) => {
      if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) this.talk.requestSubmit();
    });
    this.talk.addEventListener('submit', async (e) => {
      e.preventDefault();
      const name = this.followed;
      if (!text.value.trim() || !name) return;
      const button = this.talk.querySelector('button[type=submit]');
      button.disabled = true;
      if (await sendText(name, text.value)) text.value = '';
      button.disabled = false;
    });
    this.stopButton = h(
      'button',
      { type: 'button', 'data-action': 'stop-orchestrator', title: "Stop the orchestrator (the project's spec.orchestrator.stopped); its checkout is kept", onclick: () => setOrchestratorStopped(this.name, true) },
      'Stop',
    );
    this.resumeButton = h(
      'button',
      { type: 'button', 'data-action': 'resume-orchestrator', title: 'Start the orchestrator again', onclick: () => setOrchestratorStopped(this.name, false) },
      'Resume',
    );
    this.orchPanel = h(
      'section',
      { id: 'orchestrator', class: 'panel orch-panel', 'aria-label': 'Orchestrator', hidden: true },
      h('div', { class: 'panel-head' }, h('h2', {}, 'Orchestrator'), this.orchHead, h('span', { class: 'spacer' }), this.stopButton, this.resumeButton),
      h(
        'div',
        { class: 'orch-grid' },
        h('div', { class: 'orch-live' }, h('div', { class: 'panel-note hint muted' }, 'Its transcript: the last 500 lines, then live'), this.orchTranscript),
        h(
          'div',
          { class: 'orch-side panel-body' },
          h('h3', {}, 'Talk to it'),
          this.talk,
          h('h3', {}, 'Limits and workers'),
          this.orchFacts,
        ),
      ),
    );
    return this.orchPanel;
  }

  /** Shows the project's orchestrator in its panel, following the transcript of the one it has now. */
  renderOrchestrator(p, all) {
    const spec = p?.spec?.orchestrator;
    const orch = orchestratorFor(this.name, all);
    this.orchPanel.hidden = !spec && !orch;
    if (this.orchPanel.hidden) {
      this.follow(null);
      return;
    }
    const sum = orch ? orchestratorSummary(orch, all, p) : null;
    const stopped = spec ? !!spec.stopped : !!orch?.spec?.stopped;
    this.orchPanel.dataset.orchestrator = orch?.metadata?.name ?? '';
    this.orchPanel.dataset.stopped = String(stopped);
    replace(
      this.orchHead,
      orch
        ? [
            h('a', { href: `#/sessions/${encodeURIComponent(orch.metadata.name)}`, 'data-field': 'name' }, orch.metadata.name),
            phaseChip(orch),
            h('span', { class: 'activity-line', 'data-field': 'activity' }, activityOf(orch)),
          ]
        : h('span', { class: 'muted' }, 'its session is made once the project is Ready'),
      stopped && orch?.status?.phase !== 'Stopped' ? chip('quiet', 'stopping', { 'data-field': 'stopped' }) : null,
    );
    this.stopButton.disabled = stopped;
    this.resumeButton.disabled = !stopped;
    this.talk.querySelector('button[type=submit]').disabled = !orch;
    replace(
      this.orchFacts,
      [
        ['Workers alive', `${sum?.workers ?? 0} of at most ${maxSessionsOf(p)}`, 'workers'],
        ...limitFacts(spec),
        ['Reports', sum ? `${sum.batches} batch${sum.batches === 1 ? '' : 'es'} of its workers' reports typed in` : '—'],
        ['Checkout', orch ? checkoutOf(orch, p) : '—'],
      ].map(([k, v, field]) => [h('dt', {}, k), h('dd', { 'data-field': field }, v)]),
    );
    this.follow(orch?.metadata?.name ?? null);
  }

  /** Follows the transcript of orchestrator `name` (none: stops following). */
  follow(name) {
    if (name === (this.followed ?? null)) return;
    this.log?.stop();
    this.log = null;
    this.followed = name;
    if (name) {
      this.orchTranscript.textContent = '';
      this.log = followTranscript(this.orchTranscript, name);
    }
  }

  unmount() {
    this.log?.stop();
  }

  mount(root) {
    this.head = h('div', { class: 'session-head' });
    this.budget = h('div', { class: 'panel-body', 'data-field': 'budget' });
    this.sessions = h('div', { class: 'rows', 'data-field': 'sessions' });
    this.prs = h('div', { class: 'panel-body', 'data-field': 'pull-requests' });
    this.queue = h('div', { class: 'panel-body', 'data-field': 'queue' });
    this.sessionsNote = h('span', { class: 'hint muted', 'data-field': 'workers-first' });
    replace(
      root,
      h(
        'section',
        { id: 'project', 'data-project': this.name },
        h('nav', { class: 'crumbs' }, h('a', { href: '#/' }, 'Sessions'), ' / project ', h('span', {}, this.name)),
        this.head,
        this.orchestratorPanel(),
        h(
          'div',
          { class: 'project-grid' },
          h('section', { class: 'panel', 'aria-label': 'Budget and usage' }, h('div', { class: 'panel-head' }, h('h2', {}, 'Budget and usage')), this.budget),
          h('section', { class: 'panel', 'aria-label': 'Queue' }, h('div', { class: 'panel-head' }, h('h2', {}, 'Queue')), this.queue),
          h('section', { class: 'panel wide', 'aria-label': 'Pull requests' }, h('div', { class: 'panel-head' }, h('h2', {}, 'Pull requests')), this.prs),
          h(
            'section',
            { class: 'panel wide sessions-panel', 'aria-label': 'Sessions' },
            h('div', { class: 'panel-head' }, h('h2', {}, 'Sessions'), this.sessionsNote, h('span', { class: 'spacer' }), h('a', { class: 'button', href: '#/new' }, 'New session')),
            this.sessions,
          ),
        ),
      ),
    );
    this.render();
  }

  update(change) {
    if (change.kind === 'projects' && change.type !== 'RESET' && change.obj?.metadata?.name !== this.name) return;
    if (change.kind === 'events') {
      if (change.type === 'RESET') return;
      if (change.obj?.involvedObject?.kind === 'Session') this.refreshRow(change.obj.involvedObject.name);
      return;
    }
    if (change.kind === 'sessions' && change.type === 'MODIFIED') {
      if (change.obj?.spec?.project !== this.name && !this.rowOf(change.obj?.metadata?.name)) return;
      if (change.obj?.spec?.role === 'orchestrator') {
        // Its panel alone: it has no row.
        this.render({ rows: false });
        return;
      }
      if (this.rowOf(change.obj.metadata.name) && change.obj.spec?.project === this.name) {
        // One session changed: its row alone, and the lists it is counted in.
        this.refreshRow(change.obj.metadata.name);
        this.render({ rows: false });
        return;
      }
    }
    this.render();
  }

  rowOf(name) {
    return name ? this.sessions.querySelector(`[data-session="${CSS.escape(name)}"]`) : null;
  }

  refreshRow(name) {
    const row = this.rowOf(name);
    const s = this.store.sessions.get(name);
    if (row && s) row.replaceWith(sessionRow(s, this.store));
  }

  render({ rows = true } = {}) {
    const p = this.store.projects.get(this.name);
    const all = [...this.store.sessions.values()].filter((s) => s.spec?.project === this.name);
    const orch = orchestratorFor(this.name, all);
    // The orchestrator's workers first, then the others; the orchestrator has its panel.
    const mine = projectRows(all, orch?.metadata?.name, byAge);
    this.renderOrchestrator(p, all);
    if (!p) {
      replace(this.head, h('h1', {}, this.name), h('p', { class: 'muted' }, this.store.loaded.projects ? 'No such project.' : 'Loading…'));
    } else {
      const ready = (p.status?.conditions ?? []).find((c) => c.type === 'Ready');
      replace(
        this.head,
        h('div', { class: 'title-line' }, h('h1', {}, this.name), ready ? chip(ready.status === 'True' ? 'good' : 'bad', ready.status === 'True' ? 'Ready' : `Not ready: ${ready.reason}`, { 'data-field': 'ready' }) : null),
        h(
          'div',
          { class: 'sub-line' },
          h('span', { class: 'mono' }, p.spec.path),
          p.spec.repo ? h('span', {}, h('span', { class: 'muted' }, 'repo '), p.spec.repo) : null,
          h('span', {}, h('span', { class: 'muted' }, 'base '), p.status?.defaultBranch ?? p.spec.defaultBranch ?? '—'),
          p.spec.maxConcurrentSessions ? h('span', {}, h('span', { class: 'muted' }, 'at most '), `${p.spec.maxConcurrentSessions} at once`) : null,
          h('span', {}, `${mine.length} session${mine.length === 1 ? '' : 's'}`),
        ),
        ready && ready.status !== 'True' && ready.message ? h('p', { class: 'bad-text' }, ready.message) : null,
      );
    }

    const usage = p?.status?.usage ?? {};
    const used = (usage.inputTokens ?? 0) + (usage.outputTokens ?? 0);
    const budget = p?.spec?.budget;
    const spent = (p?.status?.conditions ?? []).find((c) => c.type === 'BudgetSpent' && c.status === 'True');
    replace(
      this.budget,
      budget?.tokens ? budgetLine('Tokens', used, budget.tokens, tokens) : null,
      budget?.costUSD ? budgetLine('Cost', usage.costUSD ?? 0, budget.costUSD, dollars) : null,
      !budget?.tokens && !budget?.costUSD ? h('p', { class: 'muted' }, 'No budget set: sessions start whatever they use.') : null,
      h(
        'dl',
        { class: 'facts' },
        h('dt', {}, 'Input tokens'),
        h('dd', {}, tokens(usage.inputTokens ?? 0)),
        h('dt', {}, 'Output tokens'),
        h('dd', {}, tokens(usage.outputTokens ?? 0)),
        h('dt', {}, 'Cost'),
        h('dd', {}, dollars(usage.costUSD) || 'not reported'),
      ),
      spent ? h('p', { class: 'bad-text' }, spent.message || 'The budget is spent: new sessions wait.') : null,
    );

    const queued = mine.filter((s) => s.status?.phase === 'Queued');
    replace(
      this.queue,
      queued.length
        ? h(
            'ol',
            { class: 'queue' },
            queued.map((s) => {
              const why = (s.status?.conditions ?? []).find((c) => c.type === 'Ready');
              return h(
                'li',
                { 'data-session': s.metadata.name },
                h('a', { href: `#/sessions/${encodeURIComponent(s.metadata.name)}` }, s.metadata.name),
                ' ',
                chip('warn', why?.reason ?? 'Queued'),
                why?.message ? h('div', { class: 'muted' }, why.message) : null,
              );
            }),
          )
        : h('p', { class: 'muted' }, 'Nothing waits for a slot.'),
    );

    const withPr = mine.filter((s) => s.status?.pullRequest);
    replace(
      this.prs,
      withPr.length
        ? h(
            'table',
            { class: 'prs' },
            h('thead', {}, h('tr', {}, ['PR', 'Session', 'State', 'Updated'].map((c) => h('th', { scope: 'col' }, c)))),
            h(
              'tbody',
              {},
              withPr.map((s) => {
                const pr = s.status.pullRequest;
                const url = safeUrl(pr.url);
                return h(
                  'tr',
                  { 'data-pr': String(pr.number) },
                  h('td', {}, url ? h('a', { href: url, target: '_blank', rel: 'noopener noreferrer' }, `#${pr.number}`) : `#${pr.number}`),
                  h('td', {}, h('a', { href: `#/sessions/${encodeURIComponent(s.metadata.name)}` }, s.metadata.name)),
                  h('td', { class: 'chips' }, prChips(pr).slice(1)),
                  h('td', { class: 'muted' }, age(s.status?.activity?.since ?? s.metadata.creationTimestamp)),
                );
              }),
            ),
          )
        : h('p', { class: 'muted' }, 'No pull requests yet.'),
    );

    const workers = orch ? mine.filter((s) => orchestratorOf(s) === orch.metadata.name).length : 0;
    this.sessionsNote.textContent = workers ? `its orchestrator's ${workers} worker${workers === 1 ? '' : 's'} first` : '';
    if (!rows) return;
    replace(this.sessions, mine.length ? mine.map((s) => sessionRow(s, this.store)) : h('p', { class: 'muted panel-body' }, 'No sessions in this project.'));
  }
}
