// The new-session form (`#/new`): project, agent (a built-in adapter, the project's default, or a
// command line), runtime, an optional name and the prompt, created with one POST; on success the
// page goes to the new session.

import { API, request } from './api.js';
import { h, replace, toast } from './dom.js';
import { agentOf, splitCommand } from './format.js';

/** The built-in agent adapters, as the API names them (a Rust test keeps this list in step). */
export const AGENTS = [
  'claude-code',
  'codex',
  'aider',
  'opencode',
  'grok',
  'droid',
  'amp',
  'agy',
  'crush',
  'cursor',
  'qwen',
  'copilot',
  'goose',
  'auggie',
  'continue',
  'devin',
  'cline',
  'kimi',
  'kiro',
  'kilocode',
  'vibe',
  'pi',
  'autohand',
  'gemini',
];

export const RUNTIMES = ['tmux', 'process', 'docker'];

/** The Session the form's values describe. */
export function sessionFrom({ project, agent, command, runtime, name, prompt }) {
  const spec = { project };
  if (agent === 'command') spec.agent = { command: splitCommand(command) };
  else if (agent) spec.agent = agent;
  if (runtime) spec.runtime = runtime;
  if (prompt.trim()) spec.prompt = prompt;
  const metadata = name.trim() ? { name: name.trim() } : { generateName: `${project}-` };
  return { apiVersion: 'ao.dev/v1alpha1', kind: 'Session', metadata, spec };
}

export class CreatePage {
  constructor(store) {
    this.store = store;
  }

  mount(root) {
    this.project = h('select', { name: 'project', required: true });
    this.agent = h('select', { name: 'agent' });
    this.command = h('input', { name: 'command', placeholder: './scripts/agent.sh {promptFile}', autocomplete: 'off', spellcheck: 'false' });
    this.commandRow = h('label', { class: 'field', hidden: true }, h('span', {}, 'Command'), this.command, h('small', { class: 'muted' }, 'Words split at spaces; {prompt} and {promptFile} are replaced.'));
    const runtime = h('select', { name: 'runtime' }, h('option', { value: '' }, 'project default'), RUNTIMES.map((r) => h('option', { value: r }, r)));
    // The server checks the name and says what is wrong with it.
    const name = h('input', { name: 'name', placeholder: 'generated from the project', autocomplete: 'off', spellcheck: 'false' });
    const prompt = h('textarea', { name: 'prompt', rows: '6', placeholder: 'What should the agent do?' });
    const submit = h('button', { type: 'submit', class: 'primary' }, 'Create session');
    const form = h(
      'form',
      { id: 'create', class: 'panel create' },
      h('div', { class: 'panel-head' }, h('h1', {}, 'New session')),
      h(
        'div',
        { class: 'panel-body form-grid' },
        h('label', { class: 'field' }, h('span', {}, 'Project'), this.project),
        h('label', { class: 'field' }, h('span', {}, 'Agent'), this.agent),
        this.commandRow,
        h('label', { class: 'field' }, h('span', {}, 'Runtime'), runtime),
        h('label', { class: 'field' }, h('span', {}, 'Name ', h('small', { class: 'muted' }, '(optional)')), name),
        h('label', { class: 'field wide' }, h('span', {}, 'Prompt'), prompt),
        h('div', { class: 'form-actions wide' }, submit, h('a', { href: '#/' }, 'Cancel')),
      ),
    );
    this.agent.addEventListener('change', () => {
      this.commandRow.hidden = this.agent.value !== 'command';
      this.command.required = this.agent.value === 'command';
    });
    this.project.addEventListener('change', () => this.fillAgents());
    form.addEventListener('submit', async (e) => {
      e.preventDefault();
      submit.disabled = true;
      const body = sessionFrom({
        project: this.project.value,
        agent: this.agent.value,
        command: this.command.value,
        runtime: runtime.value,
        name: name.value,
        prompt: prompt.value,
      });
      const r = await request('POST', `${API}/sessions`, body);
      submit.disabled = false;
      if (r.ok && r.body?.metadata?.name) {
        toast(`session "${r.body.metadata.name}" created`, true);
        location.hash = `#/sessions/${encodeURIComponent(r.body.metadata.name)}`;
      } else {
        toast(r.message, false);
      }
    });
    replace(root, form);
    this.fillProjects();
  }

  update(change) {
    if (change.kind === 'projects') this.fillProjects();
  }

  fillProjects() {
    const names = [...this.store.projects.keys()].sort();
    const keep = this.project.value;
    replace(
      this.project,
      names.length ? null : h('option', { value: '' }, 'no projects yet: aoctl up in a repository'),
      names.map((n) => h('option', { value: n }, n)),
    );
    if (names.includes(keep)) this.project.value = keep;
    this.fillAgents();
  }

  fillAgents() {
    const keep = this.agent.value;
    const project = this.store.projects.get(this.project.value);
    const fallback = agentOf({ spec: {} }, project);
    replace(
      this.agent,
      h('option', { value: '' }, `project default (${fallback})`),
      AGENTS.map((a) => h('option', { value: a }, a)),
      h('option', { value: 'command' }, 'a command line…'),
    );
    this.agent.value = keep;
  }
}
