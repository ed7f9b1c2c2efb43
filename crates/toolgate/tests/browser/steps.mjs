// Walks Debian's headless chromium through a list of steps (signing in at the authorization
// server's real login page, opening pages, clicking, reading), driven by the playwright-core
// that scripts/setup.sh pins, and reports what a person saw and what ran, as one JSON line on
// stdout. page.mjs opens one page; this script is for flows across pages (the console tests;
// its Rust side is tests/common/browser.rs, `Steps`).
//
//   steps.mjs --steps FILE [--chromium PATH] [--node-dir DIR] [--max-seconds N]
//
// FILE is a JSON array of steps, run in order in one browser context (cookies kept):
//   {"goto": URL}                       open URL (waits for load)
//   {"click": SELECTOR}                 click the first match and wait for the next page to load
//   {"fill": SELECTOR, "value": TEXT}   type into the first match
//   {"login": NAME}                     at oidc-provider's development login and consent pages:
//                                       log in as NAME and consent, until the page leaves them
//   {"reload_until": SELECTOR, "seconds": N}  reload until SELECTOR matches (at most N s)
//   {"text": SELECTOR, "as": KEY}       every match's innerText (at most 100) into reads[KEY]
//   {"eval": EXPR, "as": KEY}           the expression's value (JSON) into evals[KEY]
//   {"html": SELECTOR, "as": KEY}       the first match's innerHTML into reads[KEY]
//   {"screenshot": FILE}                a full-page PNG of what is shown now, saved to FILE
//   {"press": SELECTOR, "key": KEY}     focus the first match and press KEY (keyboard use); with
//                                       "navigates": true, wait for the page it opens to load
// Only this machine is reachable: any other request is aborted and listed in "blocked".
//
// Output: {"url", "reads": {KEY: [text]}, "evals": {KEY: value}, "navigations": [{"url",
// "method", "status"}] (every main-frame document response), "cookies": [{name, value, httpOnly,
// secure, sameSite, path}], "console": [{"type", "text"}], "page_errors": [...], "dialogs":
// [...], "blocked": [...], "error": message-or-null}. A failed step stops the walk and is
// reported in "error" (exit code 1).
//
// Bounded: exits (code 2, no JSON) after --max-seconds (default 60), and at once when its stdin
// reaches EOF (the test that started it is gone).

import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';

const { values: opts } = parseArgs({
  options: {
    'node-dir': { type: 'string' },
    chromium: { type: 'string', default: '/usr/lib/chromium/chromium' },
    steps: { type: 'string' },
    'max-seconds': { type: 'string', default: '60' },
  },
});
if (!opts.steps) {
  console.error('steps.mjs: --steps is required');
  process.exit(64);
}
const maxSeconds = Number(opts['max-seconds']);
setTimeout(() => {
  console.error(`steps.mjs: gave up after ${maxSeconds} s`);
  process.exit(2);
}, maxSeconds * 1000).unref();
process.stdin.on('end', () => process.exit(3));
process.stdin.resume();

const nodeDir = opts['node-dir'] || process.env.TOOLGATE_NODE_DIR || join(homedir(), '.cache/toolgate/node');
const require = createRequire(join(nodeDir, 'node_modules', 'index.js'));
const { chromium } = require('playwright-core');

function local(url) {
  if (url.startsWith('data:') || url.startsWith('about:')) return true;
  try {
    const host = new URL(url).hostname;
    return host === '127.0.0.1' || host === 'localhost' || host === '[::1]';
  } catch {
    return false;
  }
}

const report = {
  url: null, reads: {}, evals: {}, navigations: [], cookies: [], console: [], page_errors: [],
  dialogs: [], blocked: [], error: null,
};
const steps = JSON.parse(readFileSync(opts.steps, 'utf8'));
const STEP_MS = 15000;

let browser;
try {
  browser = await chromium.launch({
    executablePath: opts.chromium,
    headless: true,
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
  page.on('response', (r) => {
    const req = r.request();
    if (req.isNavigationRequest() && req.frame() === page.mainFrame()) {
      report.navigations.push({ url: r.url(), method: req.method(), status: r.status() });
    }
  });
  for (const step of steps) {
    if (step.goto) {
      await page.goto(step.goto, { waitUntil: 'load', timeout: STEP_MS });
    } else if (step.click) {
      await Promise.all([
        page.waitForNavigation({ waitUntil: 'load', timeout: STEP_MS }),
        page.locator(step.click).first().click({ timeout: STEP_MS }),
      ]);
    } else if (step.fill) {
      await page.locator(step.fill).first().fill(step.value, { timeout: STEP_MS });
    } else if (step.login) {
      // oidc-provider's development interactions: a login form (any name, any password), then
      // a consent form; each posts and redirects. Done when neither is on the page.
      for (let round = 0; round < 6; round++) {
        const login = page.locator('input[name="login"]');
        if (await login.count()) {
          await login.fill(step.login);
          const password = page.locator('input[name="password"]');
          if (await password.count()) await password.fill('any');
          await Promise.all([
            page.waitForNavigation({ waitUntil: 'load', timeout: STEP_MS }),
            page.locator('button[type="submit"]').first().click(),
          ]);
          continue;
        }
        if (await page.locator('input[name="prompt"][value="consent"]').count()) {
          await Promise.all([
            page.waitForNavigation({ waitUntil: 'load', timeout: STEP_MS }),
            page.locator('button[type="submit"]').first().click(),
          ]);
          continue;
        }
        break;
      }
    } else if (step.reload_until) {
      const until = Date.now() + (step.seconds ?? 20) * 1000;
      while (!(await page.locator(step.reload_until).count())) {
        if (Date.now() > until) throw new Error(`${step.reload_until} did not appear`);
        await new Promise((r) => setTimeout(r, 300));
        await page.reload({ waitUntil: 'load', timeout: STEP_MS });
      }
    } else if (step.text) {
      const found = page.locator(step.text);
      const count = Math.min(await found.count(), 100);
      const items = [];
      for (let i = 0; i < count; i++) items.push(await found.nth(i).innerText());
      report.reads[step.as] = items;
    } else if (step.html) {
      const found = page.locator(step.html);
      report.reads[step.as] = (await found.count()) ? [await found.first().innerHTML()] : [];
    } else if (step.press) {
      const target = page.locator(step.press).first();
      await target.focus({ timeout: STEP_MS });
      if (step.navigates) {
        await Promise.all([
          page.waitForNavigation({ waitUntil: 'load', timeout: STEP_MS }),
          page.keyboard.press(step.key),
        ]);
      } else {
        await page.keyboard.press(step.key);
      }
    } else if (step.screenshot) {
      await page.screenshot({ path: step.screenshot, fullPage: true });
    } else if (step.eval) {
      const value = await page.evaluate(`(() => { const v = (${step.eval}); return v === undefined ? 'undefined' : v; })()`);
      report.evals[step.as] = value;
    } else {
      throw new Error(`unknown step ${JSON.stringify(step)}`);
    }
  }
  report.url = page.url();
  report.cookies = (await context.cookies()).map((c) => ({
    name: c.name, value: c.value, httpOnly: c.httpOnly, secure: c.secure, sameSite: c.sameSite, path: c.path,
  }));
} catch (e) {
  report.error = String(e && e.message ? e.message : e);
}
if (browser) await browser.close().catch(() => {});
process.stdout.write(JSON.stringify(report) + '\n', () => process.exit(report.error ? 1 : 0));
