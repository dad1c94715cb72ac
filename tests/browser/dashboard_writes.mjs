#!/usr/bin/env node
// Writes a study's decision log from the live dashboard in headless Chromium (Debian's /usr/bin/chromium through
// playwright-core), as a person and as another site would:
//  1. on the study page opened from the address dltune serve printed (?token=...), fills the note form and the
//     decision form and submits them: each must say it was recorded and the tracking record must show the note and
//     the decision without a reload of the page;
//  2. the same page with a wrong token: the note form must show the server's refusal;
//  3. a page of another origin (http://127.0.0.1:OTHER_PORT/, served by the test itself) posts notes to the dashboard:
//     a fetch with the token header (refused by the browser: the server grants no CORS preflight), a no-cors fetch
//     with a text/plain JSON body, and an HTML form (enctype text/plain, the JSON-in-a-form trick); none may be
//     answered 2xx.
// What the store holds afterwards is the shell test's to check (dashboard_browser_test.sh). With --read-only, the
// page at URL (of dltune serve --read-only) must show no form, and say that it is read-only.
// Usage: node dashboard_writes.mjs URL STUDY NOTE DECISION_ADOPT DECISION_BECAUSE FORGED_TEXT SCREENSHOT
//        node dashboard_writes.mjs --read-only URL SCREENSHOT
// Exit status 1 with a line per problem; 2 for bad arguments or missing tools.
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const chromiumPath = process.env.DLTUNE_CHROMIUM || '/usr/bin/chromium';
const args = process.argv.slice(2);
const readOnly = args[0] === '--read-only';
if (readOnly ? args.length !== 3 : args.length !== 7) {
  console.error('usage: node dashboard_writes.mjs URL STUDY NOTE ADOPT BECAUSE FORGED_TEXT SCREENSHOT\n'
    + '       node dashboard_writes.mjs --read-only URL SCREENSHOT');
  process.exit(2);
}
const [url, study, note, adopt, because, forged, screenshot] = readOnly ? [args[1], '', '', '', '', '', args[2]] : args;
if (!existsSync(chromiumPath)) {
  console.error(`dashboard_writes: ${chromiumPath} is missing: run scripts/setup`);
  process.exit(2);
}
const require = createRequire(resolve(process.env.DLTUNE_WEB_DIR || resolve(here, '../../web/node_modules'), 'package.json'));
const { chromium } = require('playwright-core');

const problems = [];
const base = new URL(url);

// A read-only dashboard's page: no form, and a line that says why.
async function checkReadOnly(page) {
  await page.goto(url);
  await page.getByText('This dashboard is read-only').waitFor({ timeout: 30000 })
    .catch(() => problems.push('the read-only page does not say it is read-only'));
  if (await page.locator('form[data-write]').count()) problems.push('the read-only page shows a form');
  await page.screenshot({ path: screenshot, fullPage: true }).catch(() => {});
}

const studyUrl = `${url}#/study/${encodeURIComponent(study)}`;
const browser = await chromium.launch({ executablePath: chromiumPath, headless: true,
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--no-first-run'] });
try {
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  page.on('pageerror', (error) => problems.push(`page error: ${error.message}`));
  page.on('dialog', async (dialog) => { problems.push(`a dialog opened: ${dialog.message()}`); await dialog.dismiss(); });
  if (readOnly) await checkReadOnly(page);
  else await checkWrites(page);
} finally {
  await browser.close();
}

// The forms on the page of the address dltune serve printed, a wrong token and another origin's requests.
async function checkWrites(page) {
  // 1. From the page's own address: the forms write, and the tracking record shows what they wrote.
  await page.goto(studyUrl);
  const noteForm = page.locator('form[data-write="notes"]');
  await noteForm.waitFor({ timeout: 30000 });
  await page.evaluate(() => { window.notReloaded = true; });
  await noteForm.locator('textarea[name="text"]').fill(note);
  await noteForm.locator('button').click();
  const status = page.locator('.write-status');
  await status.filter({ hasText: 'Recorded: noted on study' }).waitFor({ timeout: 15000 })
    .catch(async () => problems.push(`the note form says: ${await status.textContent()}`));
  const facts = page.locator('table.facts');
  await facts.filter({ hasText: note }).waitFor({ timeout: 15000 })
    .catch(() => problems.push('the tracking record does not show the note written from the page'));
  const decisionForm = page.locator('form[data-write="decisions"]');
  await decisionForm.locator('input[name="adopt"]').fill(adopt);
  await decisionForm.locator('input[name="because"]').fill(because);
  await decisionForm.locator('button').click();
  await status.filter({ hasText: 'Recorded: decided on study' }).waitFor({ timeout: 15000 })
    .catch(async () => problems.push(`the decision form says: ${await status.textContent()}`));
  await facts.filter({ hasText: because }).waitFor({ timeout: 15000 })
    .catch(() => problems.push('the tracking record does not show the decision written from the page'));
  if (!(await page.evaluate(() => window.notReloaded === true))) problems.push('the page reloaded to show the write');
  await page.screenshot({ path: screenshot, fullPage: true }).catch(() => {});

  // 2. A wrong token: the server's refusal is shown, nothing recorded.
  const wrong = new URL(url);
  wrong.searchParams.set('token', '0'.repeat(32));
  await page.goto(`${wrong}#/study/${encodeURIComponent(study)}`);
  await noteForm.waitFor({ timeout: 30000 });
  await noteForm.locator('textarea[name="text"]').fill(forged);
  await noteForm.locator('button').click();
  await status.filter({ hasText: "Not recorded: a write needs the dashboard's token" }).waitFor({ timeout: 15000 })
    .catch(async () => problems.push(`with a wrong token the page says: ${await status.textContent()}`));

  // 3. Another origin (another port of this machine) posting to the dashboard.
  const other = `http://127.0.0.1:${Number(base.port) === 65535 ? 65534 : Number(base.port) + 1}/`;
  await page.route(`${other}**`, (route) => route.fulfill({ contentType: 'text/html', body: '<!doctype html><title>other</title><p>another site</p>' }));
  const answers = [];
  page.on('response', (response) => {
    if (response.url().startsWith(`${base.origin}/api/`)) answers.push(`${response.request().method()} ${response.status()}`);
  });
  await page.goto(other);
  const target = `${base.origin}/api/studies/${encodeURIComponent(study)}/notes`;
  const token = base.searchParams.get('token');
  const results = await page.evaluate(async ({ target, token, forged }) => {
    const out = {};
    try {
      const response = await fetch(target, { method: 'POST', body: JSON.stringify({ text: forged }),
        headers: { 'Content-Type': 'application/json', 'X-Dltune-Token': token } });
      out.withHeader = `answered ${response.status}`;
    } catch (error) {
      out.withHeader = `refused: ${error.message}`;
    }
    try {
      await fetch(target, { method: 'POST', mode: 'no-cors', body: JSON.stringify({ text: forged }),
        headers: { 'Content-Type': 'text/plain' } });
      out.noCors = 'sent';
    } catch (error) {
      out.noCors = `refused: ${error.message}`;
    }
    return out;
  }, { target, token, forged });
  if (!results.withHeader.startsWith('refused')) problems.push(`a cross-origin fetch with the token header was ${results.withHeader}`);
  // The JSON-in-a-form trick: a form can send text/plain whose body reads as JSON.
  await page.evaluate(({ target, forged }) => {
    const form = document.createElement('form');
    form.method = 'POST';
    form.action = target;
    form.enctype = 'text/plain';
    const input = document.createElement('input');
    input.name = `{"text": "${forged}", "x": "`;
    input.value = '"}';
    form.append(input);
    document.body.append(form);
    form.submit();
  }, { target, forged });
  await page.waitForURL(target, { timeout: 15000 }).catch(() => problems.push('the cross-site form was not sent'));
  const formAnswer = await page.locator('body').textContent().catch(() => '');
  if (!formAnswer.includes('dashboard\'s own page')) problems.push(`the cross-site form was answered: ${formAnswer}`);
  const accepted = answers.filter((a) => / 2\d\d$/.test(a));
  if (accepted.length) problems.push(`cross-site writes were accepted: ${accepted.join(', ')}`);
  console.log(`cross-origin: fetch with the token header ${results.withHeader}; no-cors fetch ${results.noCors}; answers ${answers.join(', ') || 'none readable'}; form answered: ${formAnswer}`);
}

if (problems.length) {
  for (const problem of problems) console.error(`dashboard_writes: ${problem}`);
  process.exit(1);
}
console.log('dashboard_writes: ok');
