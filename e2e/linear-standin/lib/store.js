// The stand-in's state: teams with Linear's default workflow states, workspace labels, one
// viewer, and issues (numbered per team; a moved issue keeps its former identifiers).
'use strict';

const crypto = require('node:crypto');

const ORG_URL_KEY = 'acme';
const STATES = [
  { name: 'Backlog', type: 'backlog', color: '#bec2c8' },
  { name: 'Todo', type: 'unstarted', color: '#e2e2e2' },
  { name: 'In Progress', type: 'started', color: '#f2c94c' },
  { name: 'Done', type: 'completed', color: '#5e6ad2' },
  { name: 'Canceled', type: 'canceled', color: '#95a2b3' },
];
const LABEL_COLORS = ['#eb5757', '#f2994a', '#f2c94c', '#4cb782', '#26b5ce', '#5e6ad2', '#bb87fc', '#95a2b3'];
const PRIORITY_LABELS = ['No priority', 'Urgent', 'High', 'Medium', 'Low'];

function slug(text) {
  return String(text)
    .toLowerCase()
    .normalize('NFKD')
    .replace(/[\u0300-\u036f]/g, '')
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-+|-+$/g, '')
    .slice(0, 60)
    .replace(/-+$/, '');
}

class Store {
  constructor(teams) {
    this.teamSpecs = teams;
    this.reset();
  }

  reset() {
    this.seq = 0;
    this.clock = 0;
    this.viewer = { id: crypto.randomUUID(), name: 'Stand-in Viewer', displayName: 'viewer', email: 'viewer@example.com' };
    this.teams = this.teamSpecs.map(({ key, name }) => ({
      id: crypto.randomUUID(),
      key,
      name,
      nextNumber: 1,
      states: STATES.map((s, position) => ({ id: crypto.randomUUID(), ...s, position })),
    }));
    this.labels = [];
    this.issues = [];
  }

  // A strictly increasing timestamp, so that orderings by time are total.
  now() {
    this.clock = Math.max(Date.now(), this.clock + 1);
    return new Date(this.clock).toISOString();
  }

  team(keyOrId) {
    if (keyOrId === undefined || keyOrId === null) return this.teams[0];
    const k = String(keyOrId);
    return this.teams.find((t) => t.id === k || t.key.toLowerCase() === k.toLowerCase()) || null;
  }

  stateById(id) {
    for (const t of this.teams) {
      const s = t.states.find((x) => x.id === id);
      if (s) return s;
    }
    return null;
  }

  teamState(team, name) {
    const n = String(name).toLowerCase();
    return team.states.find((s) => s.name.toLowerCase() === n) || team.states.find((s) => s.type === n) || null;
  }

  label(id) {
    return this.labels.find((l) => l.id === id) || null;
  }

  labelByName(name, create = true) {
    const found = this.labels.find((l) => l.name.toLowerCase() === String(name).toLowerCase());
    if (found || !create) return found || null;
    const l = { id: crypto.randomUUID(), name: String(name), color: LABEL_COLORS[this.labels.length % LABEL_COLORS.length] };
    this.labels.push(l);
    return l;
  }

  user(id) {
    return id === this.viewer.id ? this.viewer : null;
  }

  // By uuid, current identifier or a former one (case-insensitive).
  issue(idOrIdentifier) {
    const k = String(idOrIdentifier);
    const upper = k.toUpperCase();
    return (
      this.issues.find((i) => i.id === k) ||
      this.issues.find((i) => i.identifier === upper) ||
      this.issues.find((i) => i.previousIdentifiers.includes(upper)) ||
      null
    );
  }

  issueTeam(issue) {
    return this.teams.find((t) => t.id === issue.teamId);
  }

  url(issue) {
    const s = slug(issue.title);
    return `https://linear.app/${ORG_URL_KEY}/issue/${issue.identifier}${s ? `/${s}` : ''}`;
  }

  branchName(issue) {
    const s = slug(issue.title);
    return `${this.viewer.displayName}/${issue.identifier.toLowerCase()}${s ? `-${s}` : ''}`;
  }

  applyStateTimes(issue, state, at) {
    if (state.type === 'started' && !issue.startedAt) issue.startedAt = at;
    if (state.type === 'completed') issue.completedAt = issue.completedAt || at;
    else issue.completedAt = null;
    if (state.type === 'canceled') issue.canceledAt = issue.canceledAt || at;
    else issue.canceledAt = null;
  }

  createIssue({ team, title, description, labels = [], state, priority = 0 }) {
    const t = this.team(team);
    if (!t) throw new Error(`no team ${team}`);
    if (typeof title !== 'string' || !title) throw new Error('title is required');
    const s = state === undefined ? this.teamState(t, 'Todo') : this.teamState(t, state);
    if (!s) throw new Error(`no state ${state} in team ${t.key}`);
    if (!Number.isInteger(priority) || priority < 0 || priority > 4) throw new Error('priority is 0..4');
    const at = this.now();
    const number = t.nextNumber++;
    const issue = {
      id: crypto.randomUUID(),
      seq: ++this.seq,
      teamId: t.id,
      number,
      identifier: `${t.key}-${number}`,
      previousIdentifiers: [],
      title,
      description: description ?? null,
      priority,
      createdAt: at,
      updatedAt: at,
      archivedAt: null,
      canceledAt: null,
      completedAt: null,
      startedAt: null,
      stateId: s.id,
      labelIds: labels.map((n) => this.labelByName(n).id),
      creatorId: this.viewer.id,
      assigneeId: null,
    };
    this.applyStateTimes(issue, s, at);
    this.issues.push(issue);
    return issue;
  }

  setState(issue, name) {
    const s = this.teamState(this.issueTeam(issue), name);
    if (!s) throw new Error(`no state ${name} in team ${this.issueTeam(issue).key}`);
    const at = this.now();
    issue.stateId = s.id;
    this.applyStateTimes(issue, s, at);
    issue.updatedAt = at;
  }

  setLabels(issue, names) {
    issue.labelIds = [...new Set(names.map((n) => this.labelByName(n).id))];
    issue.updatedAt = this.now();
  }

  move(issue, teamKey) {
    const t = this.team(teamKey);
    if (!t) throw new Error(`no team ${teamKey}`);
    if (t.id === issue.teamId) throw new Error(`${issue.identifier} is already in team ${t.key}`);
    const oldState = this.stateById(issue.stateId);
    const s = t.states.find((x) => x.name === oldState.name) || t.states.find((x) => x.type === oldState.type);
    issue.previousIdentifiers.push(issue.identifier);
    issue.teamId = t.id;
    issue.number = t.nextNumber++;
    issue.identifier = `${t.key}-${issue.number}`;
    issue.stateId = s.id;
    issue.updatedAt = this.now();
  }

  archive(issue) {
    if (issue.archivedAt) throw new Error(`${issue.identifier} is already archived`);
    const at = this.now();
    issue.archivedAt = at;
    issue.updatedAt = at;
  }

  // The JSON the control API and /_standin/state show for an issue.
  describe(issue) {
    const { seq, ...rest } = issue;
    const state = this.stateById(issue.stateId);
    return {
      ...rest,
      team: this.issueTeam(issue).key,
      state: state.name,
      stateType: state.type,
      labels: issue.labelIds.map((id) => this.label(id).name),
      url: this.url(issue),
      branchName: this.branchName(issue),
    };
  }

  snapshot() {
    return {
      viewer: this.viewer,
      teams: this.teams.map(({ nextNumber, ...t }) => t),
      labels: this.labels,
      issues: this.issues.map((i) => this.describe(i)),
    };
  }
}

module.exports = { Store, STATES, PRIORITY_LABELS, slug, ORG_URL_KEY };
