// The bridge between the Rust end-to-end tests (e2e/tests/browser.rs) and a headless Chromium: one
// JSON request per line on stdin, one JSON answer per line on stdout. It holds no test logic: it
// opens contexts and pages, does what it is told, and reports what the pages logged.
//
//   AOCTL_PLAYWRIGHT_CORE=<folder of the playwright-core package> node e2e/browser/driver.mjs
//
// Requests are {"id": N, "op": NAME, ...arguments}; "expression" is the source of a function
// called with "arg" in the page. Answers are {"id": N, "ok": true, "value": V} or
// {"id": N, "ok": false, "error": TEXT}. The first line out is {"ready": true, "version": V}.
// Every wait takes a "timeout" in milliseconds (10 s when not given). Pages are named by the id
// `open` returns; a context starts with one page, and `newPage` (another tab of the same context)
// and `clickNewPage` (a Ctrl+click that opens a tab) add more; `close` closes a page, and its
// context with its last page. Dialogs (confirm()) are accepted and recorded.

import { createInterface } from 'node:readline';
import { pathToFileURL } from 'node:url';
import path from 'node:path';

const CHROMIUM = '/usr/bin/chromium';
// Without the background-networking flags Chromium calls services that a closed network refuses.
const ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];
const DEFAULT_TIMEOUT = 10_000;

const core = process.env.AOCTL_PLAYWRIGHT_CORE;
if (!core) {
  process.stderr.write('driver.mjs: AOCTL_PLAYWRIGHT_CORE names no playwright-core folder\n');
  process.exit(2);
}
const { chromium } = await import(pathToFileURL(path.join(core, 'index.mjs')).href);

// Playwright gives the browser a fresh profile folder of its own (--user-data-dir), removed
// when it closes.
const browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ARGS });

/** Open pages by id: {context, page, consoleErrors, failedRequests, dialogs}. */
const pages = new Map();
let nextPage = 1;

function say(obj) {
  process.stdout.write(JSON.stringify(obj) + '\n');
}

function pageOf(req) {
  const p = pages.get(req.page);
  if (!p) throw new Error(`no open page ${JSON.stringify(req.page)}`);
  return p;
}

const timeout = (req) => req.timeout ?? DEFAULT_TIMEOUT;

// The source of a function and its argument as one expression to evaluate in the page.
const call = (req) => `(${req.expression})(${JSON.stringify(req.arg ?? null)})`;

/** Follows a page's console, failures and dialogs, and names it. */
function track(context, page) {
  const entry = { context, page, consoleErrors: [], failedRequests: [], dialogs: [] };
  page.on('console', (m) => {
    if (m.type() === 'error') entry.consoleErrors.push(m.text());
  });
  page.on('pageerror', (e) => entry.consoleErrors.push(`uncaught: ${e.message}`));
  page.on('requestfailed', (r) => entry.failedRequests.push(`${r.method()} ${r.url()}: ${r.failure()?.errorText}`));
  page.on('response', (r) => {
    if (r.status() >= 400) entry.failedRequests.push(`${r.request().method()} ${r.url()}: ${r.status()}`);
  });
  page.on('dialog', (d) => {
    entry.dialogs.push(`${d.type()}: ${d.message()}`);
    d.accept().catch(() => {});
  });
  const id = `p${nextPage++}`;
  pages.set(id, entry);
  return id;
}

async function open(req) {
  const options = {};
  if (req.viewport) options.viewport = req.viewport;
  const context = await browser.newContext(options);
  if (req.cookies?.length) await context.addCookies(req.cookies);
  if (req.permissions?.length) await context.grantPermissions(req.permissions);
  // Source run in every document of the context before its own scripts.
  if (req.initScript) await context.addInitScript(req.initScript);
  const page = await context.newPage();
  return track(context, page);
}

const ops = {
  open,
  async close(req) {
    const p = pageOf(req);
    pages.delete(req.page);
    if ([...pages.values()].some((o) => o.context === p.context)) await p.page.close();
    else await p.context.close();
    return null;
  },
  // Makes `page` the tab in front, as a person switching to it does.
  async bringToFront(req) {
    await pageOf(req).page.bringToFront();
    return null;
  },
  // Another tab in the context of `page`.
  async newPage(req) {
    const { context } = pageOf(req);
    return track(context, await context.newPage());
  },
  // Clicks `selector` with `modifiers` (Control: a new tab, as a person's Ctrl+click) and names
  // the tab it opens, once that has loaded.
  async clickNewPage(req) {
    const { context, page } = pageOf(req);
    const opened = context.waitForEvent('page', { timeout: timeout(req) });
    await page.click(req.selector, { modifiers: req.modifiers ?? ['Control'], timeout: timeout(req) });
    const tab = await opened;
    await tab.waitForLoadState('load', { timeout: timeout(req) });
    return track(context, tab);
  },

  async goto(req) {
    const { page } = pageOf(req);
    const resp = await page.goto(req.url, { timeout: timeout(req), waitUntil: req.waitUntil ?? 'load' });
    return { status: resp ? resp.status() : null, url: page.url() };
  },
  async url(req) {
    return pageOf(req).page.url();
  },
  async waitForSelector(req) {
    const { page } = pageOf(req);
    await page.waitForSelector(req.selector, { state: req.state ?? 'attached', timeout: timeout(req) });
    return null;
  },
  // Polled with evaluate, which the page's Content-Security-Policy does not govern (Playwright's
  // own waitForFunction evaluates a string in the page, which a policy without 'unsafe-eval'
  // refuses). Errors while the page navigates are retried until the deadline.
  async waitForFunction(req) {
    const { page } = pageOf(req);
    const deadline = Date.now() + timeout(req);
    let last = 'never evaluated';
    for (;;) {
      try {
        const value = await page.evaluate(call(req));
        if (value) return value;
        last = `last value ${JSON.stringify(value)}`;
      } catch (e) {
        last = String(e?.message ?? e);
      }
      if (Date.now() > deadline) throw new Error(`not true within ${timeout(req)} ms (${last})`);
      await new Promise((r) => setTimeout(r, req.interval ?? 25));
    }
  },
  async click(req) {
    await pageOf(req).page.click(req.selector, { timeout: timeout(req) });
    return null;
  },
  async fill(req) {
    await pageOf(req).page.fill(req.selector, req.value, { timeout: timeout(req) });
    return null;
  },
  async type(req) {
    await pageOf(req).page.keyboard.type(req.text, { delay: req.delay ?? 0 });
    return null;
  },
  async press(req) {
    await pageOf(req).page.keyboard.press(req.key);
    return null;
  },
  async text(req) {
    const { page } = pageOf(req);
    return await page.locator(req.selector).first().textContent({ timeout: timeout(req) });
  },
  async attribute(req) {
    const { page } = pageOf(req);
    return await page.locator(req.selector).first().getAttribute(req.name, { timeout: timeout(req) });
  },
  async count(req) {
    return await pageOf(req).page.locator(req.selector).count();
  },
  async evaluate(req) {
    const { page } = pageOf(req);
    const work = page.evaluate(call(req));
    let timer;
    const late = new Promise((_, reject) => {
      timer = setTimeout(() => reject(new Error(`evaluate: no result within ${timeout(req)} ms`)), timeout(req));
    });
    try {
      return (await Promise.race([work, late])) ?? null;
    } finally {
      clearTimeout(timer);
    }
  },
  async cookies(req) {
    return await pageOf(req).context.cookies();
  },
  async screenshot(req) {
    const { page } = pageOf(req);
    await page.screenshot({ path: req.path, fullPage: req.fullPage ?? false, timeout: timeout(req) });
    return req.path;
  },
  async diagnostics(req) {
    const p = pageOf(req);
    return {
      url: p.page.url(),
      consoleErrors: p.consoleErrors,
      failedRequests: p.failedRequests,
      dialogs: p.dialogs,
    };
  },
};

async function handle(line) {
  let req;
  try {
    req = JSON.parse(line);
  } catch (e) {
    say({ id: null, ok: false, error: `not JSON: ${e.message}` });
    return;
  }
  const op = ops[req.op];
  if (!op) {
    say({ id: req.id, ok: false, error: `unknown op ${JSON.stringify(req.op)}` });
    return;
  }
  try {
    say({ id: req.id, ok: true, value: (await op(req)) ?? null });
  } catch (e) {
    // Playwright colours its call logs; the answer is plain text.
    say({ id: req.id, ok: false, error: String(e?.message ?? e).replace(/\x1b\[[0-9;]*m/g, '') });
  }
}

let closing = false;
async function shutdown(code) {
  if (closing) return;
  closing = true;
  await browser.close().catch(() => {});
  process.exit(code);
}
process.on('SIGTERM', () => shutdown(0));
process.on('SIGINT', () => shutdown(0));

say({ ready: true, version: browser.version() });
// Requests are handled one after the other, in order.
let queue = Promise.resolve();
const lines = createInterface({ input: process.stdin });
lines.on('line', (line) => {
  if (line.trim()) queue = queue.then(() => handle(line));
});
lines.on('close', () => {
  queue.then(() => shutdown(0));
});
