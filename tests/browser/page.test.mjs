// tests/browser/page.test.mjs — the web page of `tolk serve` as a person uses
// it, in Debian's headless Chromium driven by playwright-core (no browser is
// ever downloaded): the page loads with no request leaving the server, its
// targets and models come from the server, typing a sentence shows its
// translation, tokens and timings, the keyboard alone works, server errors
// (400; 429 with Retry-After) show the server's message, and the layout
// holds at phone width.
//
//   node --test page.test.mjs   with  TOLK=build/tolk  TOLK_SHOT=build/serve-page.png
//   [TOLK_MODEL_DIR=models/demo-en-zh]  [CHROMIUM=/usr/bin/chromium]
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { chromium } from 'playwright-core';

const TOLK = process.env.TOLK || 'build/tolk';
const MODEL = process.env.TOLK_MODEL_DIR; // unset: the server's default, the bundled demo model
const SHOT = process.env.TOLK_SHOT || 'serve-page.png';
const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';

let server, base, context, profile;

// Starts `tolk serve --port 0` and resolves with the URL it prints when ready.
function startServer(args) {
  return new Promise((resolve, reject) => {
    const p = spawn(TOLK, ['serve', '--port', '0', ...args], { stdio: ['ignore', 'pipe', 'inherit'] });
    const timer = setTimeout(() => reject(new Error('tolk serve printed no "listening on" in 30 s')), 30000);
    p.on('exit', (code) => reject(new Error(`tolk serve exited with ${code} before listening`)));
    createInterface({ input: p.stdout }).on('line', (line) => {
      const m = /^listening on (http:\/\/\S+)/.exec(line);
      if (m) { clearTimeout(timer); resolve({ proc: p, url: m[1].replace(/\/$/, '') }); }
    });
  });
}

before(async () => {
  ({ proc: server, url: base } = await startServer(MODEL ? ['-m', MODEL] : []));
  profile = mkdtempSync(join(tmpdir(), 'tolk-chromium-'));
  // A fresh profile each run (Playwright passes it as --user-data-dir); the
  // flags keep Chromium from reaching for Google's hosts, which this offline
  // machine refuses.
  context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
           '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
});

after(async () => {
  if (context) await context.close();
  if (profile) rmSync(profile, { recursive: true, force: true });
  if (server && server.exitCode === null) {
    const exited = new Promise((r) => server.once('exit', (code) => r(code)));
    server.removeAllListeners('exit');
    server.kill('SIGTERM');
    assert.equal(await exited, 0, 'tolk serve exits 0 on SIGTERM');
  }
});

// A page that records every request it makes and every console error.
async function openPage(viewport) {
  const page = await context.newPage();
  await page.setViewportSize(viewport);
  const requests = [], problems = [];
  page.on('request', (r) => requests.push(r.url()));
  page.on('console', (m) => { if (m.type() === 'error') problems.push(m.text()); });
  page.on('pageerror', (e) => problems.push(String(e)));
  await page.goto(base + '/');
  return { page, requests, problems };
}

test('typing a sentence shows its translation, tokens and timings', async () => {
  const { page, requests, problems } = await openPage({ width: 1100, height: 760 });
  assert.match(await page.title(), /tolk/);
  // The targets and the models come from the server.
  await page.locator('#target option').first().waitFor({ state: 'attached' });
  assert.ok(await page.locator('#target option[value="zh-Hans"]').count() === 1, 'target zh-Hans offered');
  await page.locator('#models li', { hasText: /en|English/ }).first().waitFor();
  await page.getByText('ready', { exact: true }).waitFor();

  // Typed as a person types, key by key: the debounce sends one request at the end.
  const posts = [];
  page.on('request', (r) => { if (r.method() === 'POST') posts.push(r.url()); });
  await page.getByLabel('English').pressSequentially('Open file', { delay: 20 });
  await page.locator('#target-out').filter({ hasText: '打开文件' }).waitFor({ timeout: 15000 });
  assert.equal(posts.length, 1, `one request after typing stopped, got ${posts.length}`);
  assert.ok(posts[0].endsWith('/v1/translate'), posts[0]);

  // Tokens: the count and the ids of the sentence.
  assert.match(await page.locator('#t-tokens').innerText(), /^[1-9]\d*$/);
  assert.match(await page.locator('#sentences li').first().innerText(), /\d+ tokens.*: \d+( \d+)*/s);
  for (const id of ['#t-queue', '#t-encode', '#t-decode', '#t-total'])
    assert.match(await page.locator(id).innerText(), /^\d+\.\d ms$/, id);

  await page.screenshot({ path: SHOT, fullPage: true });

  // Nothing came from anywhere but the server: it works offline.
  for (const u of requests) assert.ok(u.startsWith(base + '/'), `request outside the server: ${u}`);
  assert.deepEqual(problems, []);
  await page.close();
});

test('the keyboard alone: Tab to the text, type, Ctrl+Enter translates at once', async () => {
  const { page } = await openPage({ width: 1100, height: 760 });
  await page.keyboard.press('Tab');
  assert.equal(await page.evaluate(() => document.activeElement.id), 'source');
  await page.keyboard.type('Save');
  await page.keyboard.press('Control+Enter');
  await page.locator('#target-out').filter({ hasText: /\S/ }).waitFor({ timeout: 15000 });
  // The options are labelled controls a screen reader can name.
  await page.getByLabel('Target').selectOption('zh-Hans');
  await page.getByLabel('Beam').fill('1');
  await page.getByRole('button', { name: 'Translate' }).press('Enter');
  await page.locator('#target-out[aria-busy="false"]').waitFor();
  await page.close();
});

test('a server error shows its status and message', async () => {
  const { page } = await openPage({ width: 1100, height: 760 });
  await page.getByLabel('Beam').fill('1000');
  await page.getByLabel('English').fill('Open file');
  await page.getByRole('button', { name: 'Translate' }).click();
  const alert = page.getByRole('alert');
  await alert.waitFor({ timeout: 15000 });
  // The server's own words follow the status, not a generic "failed".
  assert.match(await alert.innerText(), /^4\d\d [A-Z][a-z ]+: .*beam/i);
  await page.close();
});

test('429 from the rate limit shows the server\'s message and Retry-After', async () => {
  const limited = await startServer([...(MODEL ? ['-m', MODEL] : []), '--rate-limit', '1/min']);
  try {
    const page = await context.newPage();
    await page.goto(limited.url + '/');
    await page.getByLabel('English').fill('Open file');
    const alert = page.getByRole('alert');
    // The first translation spends the minute's one request; the next is refused.
    for (let i = 0; i < 5 && !(await alert.isVisible()); i++) {
      await page.getByRole('button', { name: 'Translate' }).click();
      await page.locator('#target-out[aria-busy="false"]').waitFor();
    }
    assert.match(await alert.innerText(), /^429 Too many requests: .+ \(retry in \d+ s\)$/);
    await page.close();
  } finally {
    limited.proc.removeAllListeners('exit');
    limited.proc.kill('SIGTERM');
  }
});

test('phone width: one column, nothing wider than the screen', async () => {
  const { page } = await openPage({ width: 375, height: 740 });
  await page.getByLabel('English').fill('Open file');
  await page.locator('#target-out').filter({ hasText: '打开文件' }).waitFor({ timeout: 15000 });
  const { scroll, client, srcBox, outBox } = await page.evaluate(() => ({
    scroll: document.documentElement.scrollWidth, client: document.documentElement.clientWidth,
    srcBox: document.getElementById('source').getBoundingClientRect().toJSON(),
    outBox: document.getElementById('target-out').getBoundingClientRect().toJSON(),
  }));
  assert.ok(scroll <= client, `page ${scroll}px wide in a ${client}px screen`);
  assert.ok(outBox.top >= srcBox.bottom, 'translation below the text at phone width');
  await page.screenshot({ path: SHOT.replace(/\.png$/, '-phone.png'), fullPage: true });
  await page.close();
});
