// Opens one page in Debian's headless chromium, driven by the playwright-core that
// scripts/setup.sh pins, and reports what a person would see and what ran, as one JSON line on
// stdout. The harness every page test uses (its Rust side: tests/common/browser.rs).
//
// Run with the Node 22 that scripts/setup.sh installs; playwright-core is resolved from
// <node-dir>/node_modules (--node-dir, else $TOOLGATE_NODE_DIR, else ~/.cache/toolgate/node).
//
//   page.mjs --url URL [--chromium PATH] [--text SELECTOR ...] [--eval EXPR ...]
//            [--press SELECTOR::KEY ...] [--screenshot FILE] [--max-seconds N]
//
// URL is file:// or http(s)://127.0.0.1 / localhost; every request elsewhere is aborted and
// listed in "blocked" (a page under test reaches nothing beyond this machine). Steps, in order:
// load the page; each --press focuses the first match of SELECTOR and presses KEY (keyboard use,
// e.g. `summary::Enter` opens a <details>); then reads each --text SELECTOR (every match, at
// most 100: its innerText and whether it is visible) and each --eval EXPR (a JavaScript
// expression evaluated in the page, its value as JSON); then the screenshot (full page).
//
// Output: {"title", "url", "texts": {SELECTOR: [{"text", "visible"}]}, "evals": {EXPR: value},
// "console": [{"type", "text"}], "page_errors": [message], "dialogs": [{"type", "message"}],
// "blocked": [url], "error": message-or-null}. Dialogs (alert, confirm, prompt) are recorded
// and dismissed. A failure to load or run a step is reported in "error" with what was seen so
// far, and the exit code is 1.
//
// Bounded: it exits (code 2, no JSON) after --max-seconds (default 30), and at once when its
// stdin reaches EOF (the test that started it is gone).

import { createRequire } from 'node:module';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';

const { values: opts } = parseArgs({
  options: {
    'node-dir': { type: 'string' },
    chromium: { type: 'string', default: '/usr/lib/chromium/chromium' },
    url: { type: 'string' },
    text: { type: 'string', multiple: true, default: [] },
    eval: { type: 'string', multiple: true, default: [] },
    press: { type: 'string', multiple: true, default: [] },
    screenshot: { type: 'string' },
    'max-seconds': { type: 'string', default: '30' },
  },
});
if (!opts.url) {
  console.error('page.mjs: --url is required');
  process.exit(64);
}

const maxSeconds = Number(opts['max-seconds']);
setTimeout(() => {
  console.error(`page.mjs: gave up after ${maxSeconds} s`);
  process.exit(2);
}, maxSeconds * 1000).unref();
process.stdin.on('end', () => process.exit(3));
process.stdin.resume();

const nodeDir = opts['node-dir'] || process.env.TOOLGATE_NODE_DIR || join(homedir(), '.cache/toolgate/node');
const require = createRequire(join(nodeDir, 'node_modules', 'index.js'));
const { chromium } = require('playwright-core');

// Only this machine: pages, their subresources and the test servers they talk to.
function local(url) {
  if (url.startsWith('file:') || url.startsWith('data:') || url.startsWith('about:')) return true;
  try {
    const host = new URL(url).hostname;
    return host === '127.0.0.1' || host === 'localhost' || host === '[::1]';
  } catch {
    return false;
  }
}

const report = {
  title: null,
  url: null,
  texts: {},
  evals: {},
  console: [],
  page_errors: [],
  dialogs: [],
  blocked: [],
  error: null,
};

let browser;
try {
  browser = await chromium.launch({
    executablePath: opts.chromium,
    headless: true,
    // No first-run work, no background traffic of the browser's own.
    args: ['--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    timeout: maxSeconds * 1000,
  });
  const context = await browser.newContext({ serviceWorkers: 'block' });
  await context.route('**/*', (route) => {
    const url = route.request().url();
    if (local(url)) return route.continue();
    report.blocked.push(url);
    return route.abort('blockedbyclient');
  });
  const page = await context.newPage();
  page.on('console', (m) => report.console.push({ type: m.type(), text: m.text() }));
  page.on('pageerror', (e) => report.page_errors.push(String(e && e.message ? e.message : e)));
  page.on('dialog', (d) => {
    report.dialogs.push({ type: d.type(), message: d.message() });
    d.dismiss().catch(() => {});
  });
  await page.goto(opts.url, { waitUntil: 'load', timeout: maxSeconds * 1000 });
  report.url = page.url();
  for (const step of opts.press) {
    const at = step.lastIndexOf('::');
    if (at < 0) throw new Error(`--press ${step}: expected SELECTOR::KEY`);
    const target = page.locator(step.slice(0, at)).first();
    await target.focus({ timeout: 5000 });
    await page.keyboard.press(step.slice(at + 2));
  }
  report.title = await page.title();
  for (const selector of opts.text) {
    const found = page.locator(selector);
    const count = Math.min(await found.count(), 100);
    const items = [];
    for (let i = 0; i < count; i++) {
      const item = found.nth(i);
      items.push({ text: await item.innerText(), visible: await item.isVisible() });
    }
    report.texts[selector] = items;
  }
  for (const expr of opts.eval) {
    // `undefined` has no JSON form: it is reported as the string "undefined".
    const value = await page.evaluate(`(() => { const v = (${expr}); return v === undefined ? 'undefined' : v; })()`);
    report.evals[expr] = value;
  }
  if (opts.screenshot) await page.screenshot({ path: opts.screenshot, fullPage: true });
} catch (e) {
  report.error = String(e && e.message ? e.message : e);
}
if (browser) await browser.close().catch(() => {});
process.stdout.write(JSON.stringify(report) + '\n', () => process.exit(report.error ? 1 : 0));
