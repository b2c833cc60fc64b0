// The dashboard's entry: keeps sessions, projects and events live from their watch streams, says
// in #live whether they are, counts the groups in the document title, tells the person through the
// browser's notifications when asked to (notify.js), and shows the view the location's hash names
// (`#/`, `#/new`, `#/sessions/NAME`, `#/projects/NAME`).

import { Watch } from './api.js';
import { h, replace } from './dom.js';
import { countGroups, titleFor } from './group.js';
import { eventTime } from './format.js';
import { Overview } from './overview.js';
import { SessionPage } from './session.js';
import { ProjectPage } from './project.js';
import { CreatePage } from './create.js';
import { Notifier } from './notify.js';

/** What the watches hold, and who hears about changes. */
class Store {
  constructor() {
    this.sessions = new Map();
    this.projects = new Map();
    this.events = new Map();
    /** The newest event of each session, by session name. */
    this.latest = new Map();
    this.listeners = new Set();
    this.loaded = { sessions: false, projects: false, events: false };
  }

  reset(kind, items) {
    const map = this[kind];
    map.clear();
    for (const o of items) map.set(o.metadata.name, o);
    if (kind === 'events') this.relatest();
    this.loaded[kind] = true;
    this.emit({ kind, type: 'RESET' });
  }

  change(kind, type, obj) {
    const map = this[kind];
    const name = obj.metadata?.name;
    if (type === 'DELETED') map.delete(name);
    else map.set(name, obj);
    if (kind === 'events') this.noteEvent(type, obj);
    this.emit({ kind, type, obj });
  }

  relatest() {
    this.latest.clear();
    for (const ev of this.events.values()) this.noteEvent('ADDED', ev);
  }

  noteEvent(type, ev) {
    const o = ev.involvedObject;
    if (!o || o.kind !== 'Session') return;
    if (type === 'DELETED') {
      const rest = [...this.events.values()].filter((e) => e.involvedObject?.kind === 'Session' && e.involvedObject.name === o.name);
      rest.sort((a, b) => (eventTime(a) < eventTime(b) ? -1 : 1));
      if (rest.length) this.latest.set(o.name, rest[rest.length - 1]);
      else this.latest.delete(o.name);
      return;
    }
    const seen = this.latest.get(o.name);
    if (!seen || eventTime(seen) <= eventTime(ev)) this.latest.set(o.name, ev);
  }

  latestEvent(session) {
    return this.latest.get(session);
  }

  /** The events about a session, newest first. */
  eventsOf(session) {
    return [...this.events.values()]
      .filter((e) => e.involvedObject?.kind === 'Session' && e.involvedObject.name === session)
      .sort((a, b) => (eventTime(a) < eventTime(b) ? 1 : -1));
  }

  subscribe(fn) {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  emit(change) {
    for (const fn of [...this.listeners]) fn(change);
  }
}

const store = new Store();
const live = document.getElementById('live');
const states = new Map();
const LIVE_WORDS = { live: 'live', connecting: 'connecting…', offline: 'offline' };

function showLive() {
  const all = [...states.values()];
  let state = 'live';
  if (all.some((s) => s.state === 'offline')) state = 'offline';
  else if (all.length < 3 || all.some((s) => s.state === 'connecting')) state = 'connecting';
  live.dataset.state = state;
  const detail = all.find((s) => s.state !== 'live' && s.detail)?.detail ?? '';
  live.title = detail || (state === 'live' ? 'following the server’s watch streams' : '');
  replace(live, h('span', { class: 'pulse', 'aria-hidden': 'true' }), LIVE_WORDS[state]);
  const signIn = document.getElementById('signin');
  signIn.hidden = !/unauthori[sz]ed|401/i.test(detail);
}

for (const plural of ['sessions', 'projects', 'events']) {
  const w = new Watch(plural, {
    onReset: (items) => store.reset(plural, items),
    onChange: (type, obj) => store.change(plural, type, obj),
    onState: (state, detail) => {
      states.set(plural, { state, detail });
      showLive();
    },
  });
  w.run();
}
showLive();

// The browser's notifications, when the person asks for them (the header's bell).
new Notifier(store, document.getElementById('notify'));

// The title counts what the overview shows across all projects and labels, so a background tab
// tells at a glance whether anything waits for a person.
let lastTitle = null;
store.subscribe((change) => {
  if (change.kind !== 'sessions') return;
  const title = titleFor(countGroups(store.sessions.values()));
  if (title !== lastTitle) document.title = title;
  lastTitle = title;
});

const root = document.getElementById('view');
let view = null;
let unsubscribe = null;

/** The view for the current hash. */
function route() {
  const hash = location.hash.replace(/^#/, '') || '/';
  const parts = hash.split('/').filter(Boolean).map(decodeURIComponent);
  unsubscribe?.();
  view?.unmount?.();
  if (parts.length === 0) view = new Overview(store);
  else if (parts[0] === 'new' && parts.length === 1) view = new CreatePage(store);
  else if (parts[0] === 'sessions' && parts.length === 2) view = new SessionPage(store, parts[1]);
  else if (parts[0] === 'projects' && parts.length === 2) view = new ProjectPage(store, parts[1]);
  else view = { mount: (el) => replace(el, h('div', { class: 'empty' }, h('p', {}, `Nothing at ${hash}.`), h('a', { href: '#/' }, 'Back to the overview'))) };
  for (const a of document.querySelectorAll('header nav a')) {
    a.toggleAttribute('aria-current', a.getAttribute('href') === `#/${parts[0] ?? ''}`);
  }
  root.replaceChildren();
  view.mount(root);
  unsubscribe = store.subscribe((change) => view.update?.(change));
  window.scrollTo(0, 0);
}

window.addEventListener('hashchange', route);
route();
