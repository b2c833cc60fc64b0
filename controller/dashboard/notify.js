// The browser's own notifications, for a person who asks for them (one click on the header's
// bell): a session that needs input, is stuck or is ready to merge is told once per episode —
// once across every tab of the browser and across reloads, as the notifiers tell each event once.
// What makes an episode, and which of them are new, are pure functions below (node:test checks
// them); the rest asks the browser.

import { groupOf } from './group.js';

/** The groups a person is told about, and how a notification words them. */
export const TOLD = {
  'needs-input': 'needs input',
  stuck: 'is stuck',
  'ready-to-merge': 'is ready to merge',
};

/** Past this many new episodes at once, one notification sums them up. */
export const AT_ONCE = 3;
/** How long and how many episodes are remembered as told. */
const KEEP_MS = 7 * 24 * 3600 * 1000;
const KEEP_AT_MOST = 2000;
/** Where the browser keeps them (shared by the tabs of one profile). */
const TOLD_KEY = 'aoctl.notified';
const WANTED_KEY = 'aoctl.notify';

/**
 * The episode a session is in, as a key that stays the same while the episode lasts, or null when
 * its group is not one a person is told about. An episode of needs-input or stuck starts when the
 * activity entered its state (`status.activity.since`); one of ready-to-merge is its pull request's
 * head: a new push that is approved and green again is a new episode.
 */
export function episodeOf(session) {
  const group = groupOf(session);
  if (!(group in TOLD)) return null;
  const uid = session.metadata?.uid ?? session.metadata?.name;
  const status = session.status ?? {};
  const since = group === 'ready-to-merge'
    ? (status.pullRequest?.headSha ?? String(status.pullRequest?.number ?? status.phase ?? ''))
    : (status.activity?.since ?? status.phase ?? '');
  const pr = status.pullRequest;
  const detail = group === 'ready-to-merge' && pr ? `pull request #${pr.number} is approved and green` : (status.activity?.evidence ?? '');
  return { key: `${uid}/${group}/${since}`, group, name: session.metadata?.name ?? '', detail };
}

/**
 * What to show for `episodes` given the `told` record (key → time told, in ms): the ones not told
 * yet, one notification each, or one that sums them up past AT_ONCE; and the record to keep, with
 * every episode in it and the old or surplus entries gone.
 */
export function decide(episodes, told, now) {
  const fresh = episodes.filter((e) => !(e.key in told));
  const kept = {};
  const entries = Object.entries(told).filter(([, at]) => now - at < KEEP_MS);
  entries.sort((a, b) => b[1] - a[1]);
  for (const [k, at] of entries.slice(0, Math.max(0, KEEP_AT_MOST - episodes.length))) kept[k] = at;
  for (const e of episodes) kept[e.key] = told[e.key] ?? now;
  let show;
  if (fresh.length <= AT_ONCE) {
    show = fresh.map((e) => ({ title: `${e.name} ${TOLD[e.group]}`, body: e.detail, session: e.name, tag: e.key }));
  } else {
    const names = fresh.map((e) => e.name);
    show = [{ title: `${fresh.length} sessions need you`, body: names.slice(0, 8).join(', ') + (names.length > 8 ? ', …' : ''), session: null, tag: 'aoctl-summary' }];
  }
  return { show, told: kept };
}

/** The header's bell: asks for the browser's permission, and tells what the store's sessions need. */
export class Notifier {
  constructor(store, button) {
    this.store = store;
    this.button = button;
    this.shown = 0;
    if (!('Notification' in window)) {
      button.hidden = true;
      return;
    }
    button.hidden = false;
    button.addEventListener('click', () => this.toggle());
    window.addEventListener('storage', (e) => {
      if (e.key === WANTED_KEY) this.draw();
    });
    store.subscribe((change) => {
      if (change.kind !== 'sessions' || !this.on()) return;
      if (change.type === 'RESET') this.consider([...store.sessions.values()]);
      else if (change.type !== 'DELETED') this.consider([change.obj]);
    });
    this.draw();
  }

  /** Whether the person asked for notifications and the browser allows them. */
  on() {
    return localStorage.getItem(WANTED_KEY) === 'on' && Notification.permission === 'granted';
  }

  draw() {
    const p = Notification.permission;
    const on = this.on();
    this.button.dataset.state = p === 'denied' ? 'blocked' : on ? 'on' : 'off';
    this.button.setAttribute('aria-pressed', on ? 'true' : 'false');
    this.button.textContent = p === 'denied' ? 'Notifications blocked' : on ? 'Notifying' : 'Notify me';
    this.button.title = p === 'denied'
      ? 'The browser blocks notifications for this page: allow them in its site settings'
      : on
        ? 'Notifying when a session needs input, is stuck or is ready to merge; click to stop'
        : 'Notify me when a session needs input, is stuck or is ready to merge';
  }

  async toggle() {
    if (this.on()) {
      localStorage.setItem(WANTED_KEY, 'off');
      this.draw();
      return;
    }
    const p = Notification.permission === 'granted' ? 'granted' : await Notification.requestPermission();
    if (p === 'granted') {
      // From now on: what already waits is on the page, not news.
      await this.record([...this.store.sessions.values()], false);
      localStorage.setItem(WANTED_KEY, 'on');
    }
    this.draw();
  }

  consider(sessions) {
    return this.record(sessions, true);
  }

  /** Records the episodes of `sessions` as told, showing the new ones when `tell`; one tab at a time. */
  async record(sessions, tell) {
    const episodes = sessions.map(episodeOf).filter(Boolean);
    if (episodes.length === 0) return;
    const step = () => {
      let told = {};
      try {
        told = JSON.parse(localStorage.getItem(TOLD_KEY) ?? '{}') ?? {};
      } catch {
        told = {};
      }
      const d = decide(episodes, told, Date.now());
      localStorage.setItem(TOLD_KEY, JSON.stringify(d.told));
      if (tell) for (const n of d.show) this.show(n);
    };
    // The tabs of a browser hear the same change; the lock lets one of them tell it.
    if (navigator.locks) await navigator.locks.request('aoctl-notify', step);
    else step();
  }

  show(n) {
    const note = new Notification(n.title, { body: n.body || 'aoctl', tag: n.tag, icon: '/assets/icon.svg' });
    this.shown += 1;
    note.onclick = () => {
      window.focus();
      if (n.session) location.hash = `#/sessions/${encodeURIComponent(n.session)}`;
      note.close();
    };
  }
}
