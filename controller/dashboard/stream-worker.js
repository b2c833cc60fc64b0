// The shared worker that holds the browser's stream to the server (hub.js) for all of its tabs
// of this dashboard: each tab talks to it over a MessagePort, with the messages of the server's
// stream and its ids of its own (api.js's Stream). A tab says `bye` when it goes, and says
// `alive` while it lives; a tab silent for longer than SILENT (closed without a word, or frozen)
// has its subscriptions ended, and is told so should it wake.

import { Hub, streamURL } from './hub.js';

/** How long a tab may be silent before it counts as gone (background tabs wake once a minute). */
const SILENT = 180_000;

const hub = new Hub(streamURL(self.location));
const clients = new Set();

self.onconnect = (e) => {
  const port = e.ports[0];
  const client = hub.client((msg) => port.postMessage(msg));
  clients.add(client);
  port.onmessage = (ev) => {
    const msg = ev.data;
    client.seen = Date.now();
    clients.add(client);
    if (msg?.op === 'alive') return;
    if (msg?.op === 'bye') {
      hub.drop(client);
      clients.delete(client);
      port.close();
      return;
    }
    hub.request(client, msg);
  };
  port.start();
};

setInterval(() => {
  const before = Date.now() - SILENT;
  for (const c of clients) {
    if (c.seen < before) {
      // A frozen tab hears this when it wakes, and subscribes again.
      hub.drop(c, 'the tab was silent for too long');
      clients.delete(c);
    }
  }
}, 30_000);
