// A session's page (`#/sessions/NAME`): its live terminal, transcript, conditions and events, the
// diff of its branch with clickable lines that send `path:line: text` to the agent, and the
// buttons that send, stop, resume, delete and merge, and the answer box of a question the agent
// asked (`ask_human`); each action's answer shows in #toast. On a session a GitSource manages, a
// line under the buttons says which of a person's edits the source keeps (docs/gitops.md). A
// worker names the orchestrator that spawned it; a session without a branch (a project's
// orchestrator, on its readonly checkout) shows no diff and no merge, and an orchestrator is
// stopped and resumed through its project, which the reconciler carries over.

import { API, LogFollow, request, fetchText } from './api.js';
import { h, replace, toast } from './dom.js';
import { parseDiff } from './diff.js';
import { age, agentOf, checkoutOf, hasBranch, questionOf, safeUrl, tokens, dollars } from './format.js';
import { groupOf, GROUPS } from './group.js';
import { activityOf, chip, phaseChip, prChips } from './overview.js';
import { isOrchestrator, orchestratorOf, orchestratorSummary, workersLine } from './orchestrator.js';
import { TerminalView } from './terminal.js';

/** The most transcript text kept on the page. */
const TRANSCRIPT_MAX = 400_000;

const path = (name, sub = '') => `sessions/${encodeURIComponent(name)}${sub}`;

/** The name of the GitSource that manages `session` (annotation `ao.dev/managed-by`), or null. */
export function gitSourceOf(session) {
  const by = session?.metadata?.annotations?.['ao.dev/managed-by'];
  return typeof by === 'string' && by.startsWith('gitsource/') ? by.slice('gitsource/'.length) || null : null;
}

/** What GitSource `name` (`source`, the object, once fetched) keeps of a person's edits. */
export function sourceNote(name, source) {
  const spec = source?.spec;
  const where = spec?.url ? ` (${spec.url}${spec.path ? `, ${spec.path}` : ''})` : '';
  return `Managed by GitSource ${name}${where}: Stop, Resume and Merge when green are kept until the repository changes them; other edits are undone at its next sync.`;
}

/** The comments held back from the agent (`status.heldComments`), newest first, as the page
 * shows them: who, what they did where, the text, and the `message` that passes one on. */
export function heldEntries(session) {
  const held = session?.status?.heldComments ?? [];
  return [...held].reverse().map((c) => {
    const where = c.path ? ` on ${c.path}${c.line ? `:${c.line}` : ''}` : '';
    return {
      key: `${c.kind}-${c.id}`,
      who: c.author || 'a deleted account',
      role: c.role ?? '',
      what: `${c.kind === 'review' ? 'reviewed' : 'commented'}${where}`,
      body: c.body,
      message: c.message,
      heldAt: c.heldAt,
    };
  });
}

/** Sends `text` to the session's agent and shows the answer; whether it was taken. */
export async function sendText(name, text) {
  const r = await request('POST', `${API}/${path(name, '/input')}`, { text });
  toast(r.message, r.ok);
  return r.ok;
}

/**
 * Stops (`true`) or resumes project `project`'s orchestrator: a merge patch of the Project's
 * `spec.orchestrator.stopped`, which the reconciler carries over to the Session (a patch of the
 * Session itself would be undone). Whether it was taken.
 */
export async function setOrchestratorStopped(project, stopped) {
  const patch = { spec: { orchestrator: { stopped } } };
  const r = await request('PATCH', `${API}/projects/${encodeURIComponent(project)}`, patch, 'application/merge-patch+json');
  const done = `project "${project}": its orchestrator ${stopped ? 'stops; its checkout is kept' : 'runs again'}`;
  toast(r.ok ? done : r.message, r.ok);
  return r.ok;
}

/** Appends `text` to the transcript `<pre>` `el`, keeping its last TRANSCRIPT_MAX characters and
 * following the end when it was at the end. */
export function appendTranscript(el, text) {
  const atEnd = el.scrollHeight - el.scrollTop - el.clientHeight < 40;
  let all = el.textContent + text;
  if (all.length > TRANSCRIPT_MAX) all = all.slice(all.length - TRANSCRIPT_MAX);
  el.textContent = all;
  if (atEnd) el.scrollTop = el.scrollHeight;
}

/**
 * Follows the transcript of session `name` into the `<pre>` `el` over the page's stream: its last
 * 500 lines, then what the agent writes; `el.dataset.state` says whether it is live. The follow,
 * to stop when the page is left.
 */
export function followTranscript(el, name) {
  const log = new LogFollow(name, {
    onText: (text, fresh) => {
      if (fresh) el.textContent = '';
      appendTranscript(el, text);
    },
    onState: (state, detail) => {
      el.dataset.state = state;
      el.title = detail;
      if (state === 'offline' && !el.textContent) el.textContent = `(no transcript yet: ${detail})`;
    },
    onGone: (why) => {
      if (!el.textContent) el.textContent = `(no transcript: ${why})`;
    },
  });
  log.start();
  return log;
}

export class SessionPage {
  constructor(store, name) {
    this.store = store;
    this.name = name;
    this.abort = new AbortController();
  }

  get session() {
    return this.store.sessions.get(this.name);
  }

  mount(root) {
    const name = this.name;
    this.header = h('div', { class: 'session-head' });
    this.facts = h('dl', { class: 'facts' });
    this.conditions = h('div', { id: 'conditions', class: 'panel-body' });
    this.events = h('div', { id: 'events', class: 'panel-body' });
    this.transcript = h('pre', { id: 'transcript', class: 'transcript', tabindex: '0' });
    this.diff = h('div', { id: 'diff', class: 'diff' });
    this.diffSummary = h('span', { class: 'muted' });
    this.terminalBox = h('div', { id: 'terminal', class: 'terminal' });
    this.terminalState = h('span', { class: 'term-state', 'data-state': 'connecting' }, 'connecting…');
    this.typeButton = h(
      'button',
      { type: 'button', 'data-action': 'type', 'aria-pressed': 'false', title: 'Let your keys reach the agent' },
      'Type',
    );
    this.reconnectButton = h('button', { type: 'button', 'data-action': 'reconnect', hidden: true }, 'Reconnect');
    this.typeButton.addEventListener('click', () => this.toggleTyping());
    this.reconnectButton.addEventListener('click', () => this.terminal?.connect());

    const text = h('textarea', { name: 'text', rows: '3', required: true, placeholder: 'A message for the agent', 'aria-label': 'Message' });
    const sendForm = h(
      'form',
      { id: 'send', class: 'send' },
      text,
      h('div', { class: 'form-actions' }, h('button', { type: 'submit', class: 'primary' }, 'Send'), h('span', { class: 'hint muted' }, 'Ctrl+Enter sends')),
    );
    text.addEventListener('keydown', (e) => {
      if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) sendForm.requestSubmit();
    });
    sendForm.addEventListener('submit', async (e) => {
      e.preventDefault();
      if (!text.value.trim()) return;
      const button = sendForm.querySelector('button[type=submit]');
      button.disabled = true;
      if (await sendText(name, text.value)) text.value = '';
      button.disabled = false;
    });

    // Kept across renders, so that an answer being written survives the session's updates.
    this.questionText = h('p', { class: 'question-text' });
    const answer = h('textarea', { name: 'answer', rows: '2', required: true, placeholder: 'Your answer', 'aria-label': 'Answer' });
    this.question = h(
      'form',
      { id: 'question', class: 'panel question', hidden: true },
      h('div', { class: 'panel-head' }, h('h2', {}, 'The agent asks')),
      h('div', { class: 'panel-body' }, this.questionText, answer, h('div', { class: 'form-actions' }, h('button', { type: 'submit', class: 'primary' }, 'Answer'))),
    );
    this.question.addEventListener('submit', async (e) => {
      e.preventDefault();
      if (!answer.value.trim()) return;
      const button = this.question.querySelector('button[type=submit]');
      button.disabled = true;
      const r = await request('POST', `${API}/${path(name, '/answer')}`, { text: answer.value });
      toast(r.message, r.ok);
      if (r.ok) answer.value = '';
      button.disabled = false;
    });

    this.actions = h(
      'div',
      { class: 'actions' },
      h('button', { type: 'button', 'data-action': 'stop', onclick: () => this.setStopped(true), title: 'Stop the agent; its workspace is kept' }, 'Stop'),
      h('button', { type: 'button', 'data-action': 'resume', onclick: () => this.setStopped(false), title: 'Start the agent again in its workspace' }, 'Resume'),
      h(
        'button',
        { type: 'button', 'data-action': 'merge', onclick: () => this.merge(), title: 'Merge the pull request once it is approved and its checks pass' },
        'Merge when green',
      ),
      h('button', { type: 'button', 'data-action': 'delete', class: 'danger', onclick: () => this.remove() }, 'Delete'),
    );
    this.sourceLine = h('p', { class: 'source-note hint muted', 'data-field': 'source', hidden: true });
    this.held = h('div', { id: 'held', class: 'panel-body' });
    this.heldPanel = h(
      'section',
      { class: 'panel held-panel', 'aria-label': 'Held comments', hidden: true },
      h('div', { class: 'panel-head' }, h('h2', {}, 'Held comments')),
      h('p', { class: 'hint muted panel-note' }, 'Written on the pull request by people the project does not trust: not typed into the agent. Pass one on if it is sound.'),
      this.held,
    );

    this.changesPanel = h(
      'section',
      { class: 'panel changes-panel', 'aria-label': 'Changes' },
      h(
        'div',
        { class: 'panel-head' },
        h('h2', {}, 'Changes'),
        this.diffSummary,
        h('span', { class: 'spacer' }),
        h('button', { type: 'button', 'data-action': 'refresh-diff', onclick: () => this.loadDiff() }, 'Refresh'),
      ),
      h('p', { class: 'hint muted panel-note' }, 'Click a line to send a comment on it to the agent.'),
      this.diff,
    );

    this.root = h(
      'section',
      { id: 'session', 'data-session': name },
      h('nav', { class: 'crumbs' }, h('a', { href: '#/' }, 'Sessions'), ' / ', h('span', {}, name)),
      this.header,
      this.question,
      h(
        'div',
        { class: 'session-grid' },
        h(
          'div',
          { class: 'main-col' },
          h(
            'section',
            { class: 'panel terminal-panel', 'aria-label': 'Terminal' },
            h('div', { class: 'panel-head' }, h('h2', {}, 'Terminal'), this.terminalState, h('span', { class: 'spacer' }), this.reconnectButton, this.typeButton),
            this.terminalBox,
          ),
          this.changesPanel,
        ),
        h(
          'div',
          { class: 'side-col' },
          h('section', { class: 'panel actions-panel', 'aria-label': 'Actions' }, h('div', { class: 'panel-head' }, h('h2', {}, 'Send to the agent')), h('div', { class: 'panel-body' }, sendForm, this.actions, this.sourceLine)),
          this.heldPanel,
          h('section', { class: 'panel status-panel', 'aria-label': 'Status' }, h('div', { class: 'panel-head' }, h('h2', {}, 'Status')), h('div', { class: 'panel-body' }, this.facts)),
          h('section', { class: 'panel conditions-panel', 'aria-label': 'Conditions' }, h('div', { class: 'panel-head' }, h('h2', {}, 'Conditions')), this.conditions),
          h('section', { class: 'panel events-panel', 'aria-label': 'Events' }, h('div', { class: 'panel-head' }, h('h2', {}, 'Events')), this.events),
        ),
        h(
          'section',
          { class: 'panel transcript-panel', 'aria-label': 'Transcript' },
          h('div', { class: 'panel-head' }, h('h2', {}, 'Transcript'), h('span', { class: 'muted' }, 'the last 500 lines, then live')),
          this.transcript,
        ),
      ),
    );
    replace(root, this.root);
    this.render();
    this.renderEvents();
    this.loadDiff();
    this.followTranscript();
    this.wasRunning = isRunning(this.session);
    this.terminal = new TerminalView(this.terminalBox, name, { onState: (s, d) => this.terminalChanged(s, d) });
    this.terminal.start();
    this.ticker = setInterval(() => this.render(), 15000);
  }

  unmount() {
    clearInterval(this.ticker);
    this.abort.abort();
    this.log?.stop();
    this.terminal?.dispose();
  }

  update(change) {
    if (change.kind === 'events') {
      if (change.type === 'RESET' || change.obj?.involvedObject?.name === this.name) this.renderEvents();
      return;
    }
    if (change.kind === 'sessions' && (change.type === 'RESET' || change.obj?.metadata?.name === this.name)) {
      const before = this.seen;
      this.render();
      const s = this.session;
      // New commits, or the agent settling, change the diff.
      const mark = s ? `${s.status?.workspace?.headSha ?? ''}/${s.status?.activity?.state ?? ''}` : '';
      if (before !== undefined && mark !== before) this.loadDiff();
      this.seen = mark;
      // Once, when the agent starts running: a terminal asked for before had nothing to show.
      const running = isRunning(s);
      if (running && !this.wasRunning && this.terminalWaits) {
        this.terminalWaits = false;
        this.terminal?.connect();
      }
      this.wasRunning = running;
    }
    if (change.kind === 'projects') this.render();
    // An orchestrator's page counts its workers.
    if (change.kind === 'sessions' && change.type !== 'RESET' && orchestratorOf(change.obj) === this.name) this.render();
  }

  render() {
    const s = this.session;
    if (!s) {
      const gone = this.store.loaded.sessions;
      const word = !gone ? 'Loading' : this.existed ? 'Deleted' : 'Not found';
      replace(
        this.header,
        h('div', { class: 'title-line' }, h('h1', {}, this.name), h('span', { class: 'chip tone-quiet', 'data-field': 'phase' }, word)),
        gone ? h('p', { class: 'muted' }, this.existed ? 'This session was deleted. ' : 'There is no session of this name. ', h('a', { href: '#/' }, 'Back to the overview')) : null,
      );
      for (const b of this.actions.querySelectorAll('button')) b.disabled = gone;
      this.sourceLine.hidden = true;
      return;
    }
    this.existed = true;
    this.seen ??= `${s.status?.workspace?.headSha ?? ''}/${s.status?.activity?.state ?? ''}`;
    const project = this.store.projects.get(s.spec.project);
    const pr = s.status?.pullRequest;
    const prUrl = pr && safeUrl(pr.url);
    const group = GROUPS.find((g) => g.key === groupOf(s));
    const branch = hasBranch(s, project);
    const orchestrator = isOrchestrator(s);
    const spawnedBy = orchestratorOf(s);
    const summary = orchestrator ? orchestratorSummary(s, this.store.sessions.values(), project) : null;
    replace(
      this.header,
      h(
        'div',
        { class: 'title-line' },
        h('h1', {}, s.metadata.name),
        phaseChip(s),
        orchestrator ? chip('busy', 'orchestrator', { 'data-field': 'role' }) : null,
        group.attention ? h('span', { class: `group-tag group-${group.key}` }, group.title) : null,
      ),
      h(
        'div',
        { class: 'sub-line' },
        h('span', {}, h('span', { class: 'muted' }, 'agent '), agentOf(s, project)),
        h('span', {}, h('span', { class: 'muted' }, 'project '), h('a', { href: `#/projects/${encodeURIComponent(s.spec.project)}` }, s.spec.project)),
        spawnedBy
          ? h('span', { 'data-field': 'orchestrator' }, h('span', { class: 'muted' }, 'by orchestrator '), h('a', { href: `#/sessions/${encodeURIComponent(spawnedBy)}` }, spawnedBy))
          : null,
        h('span', { class: 'mono', 'data-field': 'checkout' }, checkoutOf(s, project)),
        summary ? h('span', { 'data-field': 'workers' }, workersLine(summary)) : null,
        pr
          ? h('span', { class: 'pr' }, prUrl ? h('a', { href: prUrl, target: '_blank', rel: 'noopener noreferrer' }, `PR #${pr.number}`) : `PR #${pr.number}`, ' ', prChips(pr).slice(1))
          : branch ? h('span', { class: 'muted' }, 'no pull request') : null,
        h('span', { class: 'muted', title: s.metadata.creationTimestamp }, `created ${age(s.metadata.creationTimestamp)} ago`),
      ),
      h('div', { class: 'activity-line' }, activityOf(s)),
    );
    // A session without a branch has no diff to comment on and no pull request to merge.
    this.changesPanel.hidden = !branch;
    const question = questionOf(s);
    this.question.hidden = !question;
    this.questionText.textContent = question ? question.text : '';
    const stopped = summary ? summary.stopped : !!s.spec.stopped;
    const deleting = !!s.metadata.deletionTimestamp;
    const mergeAuto = s.spec.reactions?.['approved-and-green'];
    const merging = mergeAuto?.auto === true && mergeAuto?.action === 'merge';
    const q = (a) => this.actions.querySelector(`[data-action=${a}]`);
    q('stop').disabled = stopped || deleting;
    q('resume').disabled = !stopped || deleting;
    q('delete').disabled = deleting;
    q('merge').disabled = deleting || pr?.state === 'merged';
    q('merge').hidden = !branch;
    q('stop').title = orchestrator ? 'Stop the orchestrator (its project\'s spec.orchestrator.stopped); its checkout is kept' : 'Stop the agent; its workspace is kept';
    q('merge').setAttribute('aria-pressed', merging ? 'true' : 'false');
    q('merge').textContent = merging ? 'Merging when green' : 'Merge when green';
    this.renderSource(s);
    this.renderHeld(s);

    const rt = s.status?.runtime;
    const usage = s.status?.usage;
    const facts = [
      ['Runtime', rt ? `${rt.kind}${rt.restarts ? `, ${rt.restarts} restarts` : ''}${rt.exitCode !== undefined ? `, exit ${rt.exitCode}` : ''}` : s.spec.runtime ?? project?.spec?.defaults?.runtime ?? 'tmux'],
      ['Workspace', s.status?.workspace?.path ?? '—'],
      ['Head', s.status?.workspace?.headSha?.slice(0, 12) ?? '—'],
      ['Usage', usage ? `${tokens(usage.inputTokens + usage.outputTokens)} tokens ${dollars(usage.costUSD)}`.trim() : '—'],
      ['Prompt', s.spec.prompt ?? '—'],
    ];
    if (s.status?.merge) facts.push(['Merge', `${s.status.merge.result ?? 'to be merged'} ${s.status.merge.message ?? ''}`.trim()]);
    if (s.status?.overlaps?.length) facts.push(['Overlaps', s.status.overlaps.map((o) => `${o.session} (${o.files.length} files)`).join(', ')]);
    replace(this.facts, facts.map(([k, v]) => [h('dt', {}, k), h('dd', { class: k === 'Prompt' ? 'prompt' : '' }, v)]));

    const conds = s.status?.conditions ?? [];
    replace(
      this.conditions,
      conds.length
        ? conds.map((c) =>
            h(
              'div',
              { class: 'condition', 'data-condition': c.type, 'data-status': c.status },
              h('div', { class: 'cond-head' }, h('span', { class: 'cond-type' }, c.type), chip(conditionTone(c), c.status), h('span', { class: 'muted age', title: c.lastTransitionTime }, age(c.lastTransitionTime))),
              h('div', { class: 'cond-body' }, h('span', { class: 'reason' }, c.reason), c.message ? h('span', { class: 'message' }, ` — ${c.message}`) : null),
            ),
          )
        : h('p', { class: 'muted' }, 'No conditions yet.'),
    );
  }

  /** The comments held back from the agent (`status.heldComments`), newest first, each with a
   * button that types its fenced quotation into the agent; redrawn only when the list changes. */
  renderHeld(s) {
    const held = s.status?.heldComments ?? [];
    this.heldPanel.hidden = !held.length;
    const key = held.map((c) => `${c.kind}:${c.id}`).join(' ');
    if (key === this.heldKey) return;
    this.heldKey = key;
    const passOn = async (button, c) => {
      button.disabled = true;
      if (await sendText(this.name, c.message)) button.textContent = 'Passed on';
      else button.disabled = false;
    };
    replace(
      this.held,
      heldEntries(s).map((e) => {
        const button = h('button', { type: 'button', 'data-action': 'pass-on', title: 'Type this comment into the agent, quoted as its author\'s' }, 'Pass on to the agent');
        button.onclick = () => passOn(button, e);
        return h(
          'div',
          { class: 'held', 'data-held': e.key },
          h('div', { class: 'held-head' }, h('strong', {}, e.who), e.role ? h('span', { class: 'muted' }, ` (${e.role})`) : null, h('span', { class: 'muted' }, ` ${e.what}`), h('span', { class: 'muted age', title: e.heldAt }, ` ${age(e.heldAt)} ago`)),
          h('pre', { class: 'held-body' }, e.body),
          button,
        );
      }),
    );
  }

  /** The line on the source that manages the session, if one does; its GitSource fetched once. */
  renderSource(s) {
    const name = gitSourceOf(s);
    this.sourceLine.hidden = !name;
    if (!name) return;
    if (this.gitSourceName !== name) {
      this.gitSourceName = name;
      this.gitSource = null;
      request('GET', `${API}/gitsources/${encodeURIComponent(name)}`).then((r) => {
        if (!r.ok || this.gitSourceName !== name || this.abort.signal.aborted) return;
        this.gitSource = r.body;
        this.sourceLine.textContent = sourceNote(name, this.gitSource);
      });
    }
    this.sourceLine.textContent = sourceNote(name, this.gitSource);
  }

  renderEvents() {
    const events = this.store.eventsOf(this.name).slice(0, 100);
    replace(
      this.events,
      events.length
        ? h(
            'ol',
            { class: 'events' },
            events.map((e) =>
              h(
                'li',
                { class: e.type === 'Warning' ? 'warning' : '', 'data-reason': e.reason },
                h('span', { class: 'reason' }, e.reason),
                e.count > 1 ? h('span', { class: 'muted' }, ` ×${e.count}`) : null,
                h('span', { class: 'muted age', title: e.lastTimestamp }, age(e.lastTimestamp)),
                h('div', { class: 'message' }, e.message),
              ),
            ),
          )
        : h('p', { class: 'muted' }, 'No events.'),
    );
  }

  toggleTyping() {
    const on = this.typeButton.getAttribute('aria-pressed') !== 'true';
    this.typeButton.setAttribute('aria-pressed', on ? 'true' : 'false');
    this.typeButton.textContent = on ? 'Typing — click to stop' : 'Type';
    this.terminalBox.classList.toggle('typing', on);
    this.terminal?.setTyping(on);
  }

  terminalChanged(state, detail) {
    // A closed terminal is opened again by itself when its agent (re)starts (see update).
    this.terminalWaits = state === 'closed';
    const words = { connecting: 'connecting…', open: 'live', closed: `closed: ${detail}`, unavailable: `unavailable: ${detail}` };
    this.terminalState.dataset.state = state;
    this.terminalState.textContent = words[state] ?? state;
    this.reconnectButton.hidden = state !== 'closed';
  }

  async setStopped(stopped) {
    const s = this.session;
    if (isOrchestrator(s)) {
      await setOrchestratorStopped(s.spec.project, stopped);
      return;
    }
    const r = await request('PATCH', `${API}/${path(this.name)}`, { spec: { stopped } }, 'application/merge-patch+json');
    toast(r.body?.message ?? (r.ok ? `session "${this.name}": ${stopped ? 'stopping; its workspace is kept' : 'resuming'}` : r.message), r.ok);
  }

  async merge() {
    const patch = { spec: { reactions: { 'approved-and-green': { auto: true, action: 'merge' } } } };
    const r = await request('PATCH', `${API}/${path(this.name)}`, patch, 'application/merge-patch+json');
    toast(r.body?.message ?? (r.ok ? `session "${this.name}": its pull request is merged once approved and green` : r.message), r.ok);
  }

  async remove() {
    if (!confirm(`Delete session "${this.name}"? Its agent is stopped and its workspace removed.`)) return;
    const r = await request('DELETE', `${API}/${path(this.name)}`);
    toast(r.body?.message ?? (r.ok ? `session "${this.name}": ${r.code === 202 ? 'deleting' : 'deleted'}` : r.message), r.ok);
  }

  /** The transcript's last 500 lines, then what the agent writes, until the page is left. */
  followTranscript() {
    this.log = followTranscript(this.transcript, this.name);
  }

  async loadDiff() {
    if (this.store.loaded.sessions && !this.session) return;
    const s = this.session;
    if (s && !hasBranch(s, this.store.projects.get(s.spec?.project))) return;
    const r = await fetchText(path(this.name, '/diff'), 'text/x-diff');
    if (!r.ok) {
      this.diffSummary.textContent = '';
      let why = r.text;
      try {
        why = JSON.parse(r.text).message ?? why;
      } catch {
        // Not a Status body: show it as it came.
      }
      replace(this.diff, h('p', { class: 'muted' }, `No diff: ${why} (${r.code || 'no answer'})`));
      return;
    }
    if (r.text === this.lastDiff) return;
    if (this.diff.querySelector('form.diff-comment')) {
      // Not under the hands of someone writing a comment: once the form closes.
      this.diffWaits = true;
      return;
    }
    this.lastDiff = r.text;
    renderDiff(this.diff, this.diffSummary, parseDiff(r.text), this.name, () => {
      if (this.diffWaits) {
        this.diffWaits = false;
        this.loadDiff();
      }
    });
  }
}

/** Whether the session's agent runs now. */
function isRunning(s) {
  return (s?.status?.conditions ?? []).some((c) => c.type === 'RuntimeReady' && c.status === 'True');
}

/** Conditions that are bad news when true. */
const NEGATIVE = new Set(['Stalled', 'Overlapping', 'BudgetSpent']);
/** Conditions whose `False` is a state, not a fault. */
const FALSE_IS_FINE = new Set(['AgentActive', 'PullRequestOpen', 'Merged', 'ReviewApproved']);

/** The colour of a condition: whether its status is good news, in its own terms. */
export function conditionTone(c) {
  if (c.status !== 'True' && c.status !== 'False') return 'quiet';
  if (NEGATIVE.has(c.type)) return c.status === 'True' ? 'bad' : 'good';
  if (c.status === 'True') return 'good';
  return FALSE_IS_FINE.has(c.type) ? 'quiet' : 'bad';
}

const STATUS_WORDS = { added: 'added', deleted: 'deleted', renamed: 'renamed', modified: 'modified' };

/**
 * Renders parsed `files` into `el`, each new-side line clickable to comment on it; `onClose`
 * runs when a comment form closes.
 */
export function renderDiff(el, summary, files, session, onClose = () => {}) {
  const adds = files.reduce((n, f) => n + f.additions, 0);
  const dels = files.reduce((n, f) => n + f.deletions, 0);
  summary.textContent = files.length ? `${files.length} file${files.length === 1 ? '' : 's'}, +${adds} −${dels}` : '';
  if (!files.length) {
    replace(el, h('p', { class: 'muted' }, 'No changes against the base branch yet.'));
    return;
  }
  const open = (line) => openComment(line, session, onClose);
  replace(
    el,
    files.map((f) =>
      h(
        'details',
        { class: 'file', open: files.length <= 30 || f.additions + f.deletions < 200, 'data-file': f.path },
        h(
          'summary',
          {},
          h('span', { class: `chip tone-${f.status === 'deleted' ? 'bad' : f.status === 'added' ? 'good' : 'quiet'}` }, STATUS_WORDS[f.status]),
          h('span', { class: 'file-path' }, f.status === 'renamed' ? `${f.oldPath} → ${f.path}` : f.path),
          h('span', { class: 'file-stat' }, h('span', { class: 'plus' }, `+${f.additions}`), ' ', h('span', { class: 'minus' }, `−${f.deletions}`)),
        ),
        f.binary ? h('p', { class: 'muted' }, 'Binary file') : null,
        f.hunks.map((hunk) =>
          h(
            'div',
            { class: 'hunk' },
            h('div', { class: 'hunk-head' }, hunk.header),
            hunk.lines.map((l) => {
              if (l.kind === 'note') return h('div', { class: 'line note' }, l.text);
              const commentable = l.kind !== 'del';
              const row = h(
                'div',
                {
                  class: `line ${l.kind}`,
                  'data-path': commentable ? f.path : null,
                  'data-line': commentable ? String(l.newLine) : null,
                  tabindex: commentable ? '0' : null,
                  title: commentable ? `Comment on ${f.path}:${l.newLine}` : null,
                },
                h('span', { class: 'ln' }, l.oldLine ?? ''),
                h('span', { class: 'ln' }, l.newLine ?? ''),
                h('span', { class: 'sign' }, l.kind === 'add' ? '+' : l.kind === 'del' ? '−' : ' '),
                h('code', { class: 'text' }, l.text),
              );
              if (commentable) {
                row.addEventListener('click', () => open(row));
                row.addEventListener('keydown', (e) => {
                  if (e.key === 'Enter') {
                    e.preventDefault();
                    open(row);
                  }
                });
              }
              return row;
            }),
          ),
        ),
      ),
    ),
  );
}

/** Opens the comment form under a diff line (closing any other). */
function openComment(line, session, onClose) {
  const where = `${line.dataset.path}:${line.dataset.line}`;
  const existing = line.nextElementSibling;
  if (existing?.matches('form.diff-comment')) {
    existing.querySelector('textarea').focus();
    return;
  }
  for (const f of document.querySelectorAll('form.diff-comment')) f.remove();
  for (const l of document.querySelectorAll('.line.selected')) l.classList.remove('selected');
  line.classList.add('selected');
  const text = h('textarea', { name: 'comment', rows: '3', required: true, placeholder: `What should change at ${where}?`, 'aria-label': `Comment on ${where}` });
  const close = () => {
    form.remove();
    line.classList.remove('selected');
    line.focus();
    onClose();
  };
  const form = h(
    'form',
    { class: 'diff-comment' },
    h('label', { class: 'muted' }, `Comment on `, h('code', {}, where)),
    text,
    h('div', { class: 'form-actions' }, h('button', { type: 'submit', class: 'primary' }, 'Send to agent'), h('button', { type: 'button', onclick: close }, 'Cancel')),
  );
  text.addEventListener('keydown', (e) => {
    if (e.key === 'Escape') close();
    if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) form.requestSubmit();
  });
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    const body = text.value.trim();
    if (!body) return;
    form.querySelector('button[type=submit]').disabled = true;
    const sent = await sendText(session, `${where}: ${body}`);
    form.querySelector('button[type=submit]').disabled = false;
    if (sent) close();
  });
  line.after(form);
  text.focus();
}
