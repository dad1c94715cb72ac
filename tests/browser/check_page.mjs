#!/usr/bin/env node
// Opens a page in headless Chromium (Debian's /usr/bin/chromium, driven by playwright-core from web/node_modules)
// and checks it as a person would see it. Used for the HTML report (`dltune report`) and reusable for any page of
// dltune's, e.g. the live dashboard at http://127.0.0.1:PORT/.
//
// Usage: node tests/browser/check_page.mjs URL SCREENSHOT [options]
//   --selector CSS         chart containers (default ".chart"); each must draw a Vega view: an SVG with at least
//                          one mark item, or a non-empty canvas
//   --min-charts N         at least N containers must exist (default 1)
//   --expect-text TEXT     TEXT must appear in the page as text (repeatable); hostile strings checked this way
//                          prove they were escaped, not parsed as markup
//   --forbid-selector CSS  no element may match CSS (repeatable), e.g. "img" for an injected <img>
//   --allow-warnings       console warnings do not fail the check (they do by default: Vega reports spec
//                          mistakes as warnings)
//   --allow-origin ORIGIN  requests to ORIGIN are allowed besides the page's own (repeatable)
//   --timeout MS           how long charts may take to draw (default 30000)
//   --then-wait-for TEXT   a live page: TEXT must NOT be shown once the charts first draw, then must appear without
//                          a reload within the timeout (the page updating itself), its charts drawn again
//
// Fails (exit status 1, a line per problem) on: a console error or warning, an uncaught page error, a JavaScript
// dialog (alert, confirm, prompt: an injected script ran), a request to another origin (a file:// page may load
// only file:, data: and blob: URLs: it must work offline), a chart container that does not draw, a missing text, a
// forbidden element. Saves a full-page screenshot to SCREENSHOT (PNG) either way, once the page has loaded: a picture
// for a person to look at, so where Chromium does not take it (twice) it says so and takes the first screen only, or
// none, rather than fail the page's checks.
// Prints how long after the start of navigation the charts of the first screen had drawn (the page's load time as a
// person sees it), and every chart (scrolling down to each as it goes).
// Exit status 2: bad arguments, or Chromium or playwright-core missing (run scripts/setup).
import { existsSync, mkdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const chromiumPath = process.env.DLTUNE_CHROMIUM || '/usr/bin/chromium';
const chromiumArgs = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking',
  '--disable-component-update', '--disable-sync', '--no-first-run'];

function usage(message) {
  console.error(`check_page: ${message}\nusage: node check_page.mjs URL SCREENSHOT [--selector CSS] [--min-charts N] ` +
    '[--expect-text TEXT]... [--forbid-selector CSS]... [--allow-warnings] [--allow-origin ORIGIN]... [--timeout MS] ' +
    '[--then-wait-for TEXT]');
  process.exit(2);
}

function parseArgs(argv) {
  const options = { selector: '.chart', minCharts: 1, expectTexts: [], forbidSelectors: [], allowWarnings: false,
    allowOrigins: [], timeout: 30000, thenWaitFor: null, positional: [] };
  for (let i = 0; i < argv.length; ++i) {
    const arg = argv[i];
    const value = () => {
      if (i + 1 >= argv.length) usage(`${arg} needs a value`);
      return argv[++i];
    };
    if (arg === '--selector') options.selector = value();
    else if (arg === '--min-charts') options.minCharts = Number(value());
    else if (arg === '--expect-text') options.expectTexts.push(value());
    else if (arg === '--forbid-selector') options.forbidSelectors.push(value());
    else if (arg === '--allow-warnings') options.allowWarnings = true;
    else if (arg === '--allow-origin') options.allowOrigins.push(value());
    else if (arg === '--timeout') options.timeout = Number(value());
    else if (arg === '--then-wait-for') options.thenWaitFor = value();
    else if (arg.startsWith('--')) usage(`unknown option ${arg}`);
    else options.positional.push(arg);
  }
  if (options.positional.length !== 2) usage('needs URL and SCREENSHOT');
  if (!Number.isInteger(options.minCharts) || options.minCharts < 0) usage('--min-charts must be a whole number');
  if (!(options.timeout > 0)) usage('--timeout must be a positive number of milliseconds');
  [options.url, options.screenshot] = options.positional;
  return options;
}

function loadPlaywright() {
  const webDir = process.env.DLTUNE_WEB_DIR || resolve(here, '../../web/node_modules');
  const require = createRequire(resolve(webDir, 'package.json'));
  try {
    return require('playwright-core');
  } catch (error) {
    console.error(`check_page: playwright-core is not installed in ${webDir}: run scripts/setup (${error.message})`);
    process.exit(2);
  }
}

// Whether a request URL stays within what the page may load.
function allowedRequest(url, pageUrl, allowOrigins) {
  const target = new URL(url);
  if (['data:', 'blob:', 'about:'].includes(target.protocol)) return true;
  const page = new URL(pageUrl);
  if (page.protocol === 'file:') return target.protocol === 'file:';
  return target.origin === page.origin || allowOrigins.includes(target.origin);
}

async function main() {
  const options = parseArgs(process.argv.slice(2));
  if (!existsSync(chromiumPath)) {
    console.error(`check_page: ${chromiumPath} is missing: run scripts/setup (Debian package chromium)`);
    process.exit(2);
  }
  const { chromium } = loadPlaywright();
  const problems = [];
  const browser = await chromium.launch({ executablePath: chromiumPath, args: chromiumArgs, headless: true });
  try {
    const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    page.on('console', (message) => {
      const type = message.type();
      if (type === 'error' || (type === 'warning' && !options.allowWarnings)) {
        problems.push(`console ${type}: ${message.text()}`);
      }
    });
    page.on('pageerror', (error) => problems.push(`page error: ${error.message}`));
    page.on('dialog', async (dialog) => {
      problems.push(`a ${dialog.type()} dialog opened (an injected script ran?): ${dialog.message()}`);
      await dialog.dismiss().catch(() => {});
    });
    // Watched, not intercepted: intercepting every request would slow the page down and skew its timings. The
    // machines that run the tests have no network, so such a request fails anyway.
    page.on('request', (request) => {
      const url = request.url();
      if (!allowedRequest(url, options.url, options.allowOrigins)) {
        problems.push(`request to another origin (the page must work offline): ${url}`);
      }
    });

    const response = await page.goto(options.url, { waitUntil: 'load', timeout: options.timeout });
    if (response && !response.ok()) problems.push(`${options.url} answered ${response.status()}`);

    // Every chart container has drawn a Vega view with marks in it. A page may draw its charts as they come near
    // the screen (the dashboard does), so the check scrolls to the first one not drawn yet, as a reader would.
    const isDrawn = `(function (element) {
      const svg = element.querySelector('svg');
      if (svg && svg.getBoundingClientRect().width > 0 && svg.querySelector('.role-mark > *')) return true;
      const canvas = element.querySelector('canvas');
      return Boolean(canvas && canvas.width > 0 && canvas.height > 0);
    })`;
    // Charts folded away (a closed <details>) are opened as a reader would, to be checked too.
    const drawn = `(function ([selector, minCharts]) {
      document.querySelectorAll('details:not([open])').forEach((details) => { details.open = true; });
      const containers = Array.from(document.querySelectorAll(selector));
      // A page still reading part of its data marks itself aria-busy (the dashboard's study page does).
      if (containers.length < minCharts || document.querySelector('[aria-busy="true"]')) return false;
      const waiting = containers.find((element) => !${isDrawn}(element));
      if (waiting) waiting.scrollIntoView();
      return !waiting;
    })`;
    // The charts of the first screen, before any scrolling: the first chart is in, and every one in view drew.
    const firstScreenDrawn = `(function ([selector, minCharts]) {
      const containers = Array.from(document.querySelectorAll(selector));
      if (containers.length < Math.min(minCharts, 1)) return false;
      return containers.filter((e) => e.getBoundingClientRect().top < innerHeight).every(${isDrawn});
    })`;
    let chartCount = 0;
    let drawnAt = null;  // ms from the start of navigation until every chart had drawn
    let firstScreenAt = null;
    try {
      firstScreenAt = await (await page.waitForFunction(
        `${firstScreenDrawn}(${JSON.stringify([options.selector, options.minCharts])}) && performance.now()`, null,
        { timeout: options.timeout, polling: 50 })).jsonValue();
      drawnAt = await (await page.waitForFunction(
        `${drawn}(${JSON.stringify([options.selector, options.minCharts])}) && performance.now()`, null,
        { timeout: options.timeout, polling: 50 })).jsonValue();
    } catch (error) {
      const report = await page.evaluate(([selector]) => Array.from(document.querySelectorAll(selector)).map((e) => {
        const svg = e.querySelector('svg');
        return `${e.id || e.className}: ${svg ? 'svg without marks' : e.querySelector('canvas') ? 'empty canvas' : 'nothing drawn'}` +
          (e.textContent ? ` (${e.textContent.slice(0, 200)})` : '');
      }), [options.selector]);
      problems.push(`charts not drawn within ${options.timeout} ms (${report.length} containers, at least ` +
        `${options.minCharts} expected): ${report.join('; ') || 'none found'}`);
    }
    if (options.thenWaitFor !== null) {
      const shown = () => page.evaluate((text) => document.body.innerText.includes(text), options.thenWaitFor);
      if (await shown()) {
        problems.push(`text already shown at the first draw, so the page's update cannot be checked: ${JSON.stringify(options.thenWaitFor)}`);
      } else {
        try {
          await page.waitForFunction((text) => document.body.innerText.includes(text), options.thenWaitFor,
            { timeout: options.timeout, polling: 200 });
          await page.waitForFunction(`${drawn}(${JSON.stringify([options.selector, options.minCharts])})`, null,
            { timeout: options.timeout, polling: 100 });
        } catch (error) {
          problems.push(`the page did not update itself to show ${JSON.stringify(options.thenWaitFor)} with its charts ` +
            `drawn within ${options.timeout} ms`);
        }
      }
    }
    chartCount = await page.evaluate((selector) => document.querySelectorAll(selector).length, options.selector);
    // Late errors (a chart's second render, tooltips' setup) surface within a moment.
    await page.waitForTimeout(300);

    const text = await page.evaluate(() => document.body.innerText);
    for (const expected of options.expectTexts) {
      if (!text.includes(expected)) problems.push(`text not shown on the page: ${JSON.stringify(expected)}`);
    }
    for (const selector of options.forbidSelectors) {
      const count = await page.evaluate((s) => document.querySelectorAll(s).length, selector);
      if (count > 0) problems.push(`${count} element(s) match the forbidden selector ${JSON.stringify(selector)}`);
    }

    mkdirSync(dirname(resolve(options.screenshot)), { recursive: true });
    const shot = await takeScreenshot(page, options.screenshot) ? `screenshot ${resolve(options.screenshot)}` :
      'no screenshot';
    console.log(`check_page: ${options.url}: ${chartCount} chart${chartCount === 1 ? '' : 's'}, ` +
      `${options.expectTexts.length} texts checked; ${shot}`);
    if (firstScreenAt !== null) {
      console.log(`check_page: the first screen's charts drawn ${Math.round(firstScreenAt)} ms after navigation started`);
    }
    if (drawnAt !== null) console.log(`check_page: every chart drawn ${Math.round(drawnAt)} ms after navigation started`);
  } finally {
    await browser.close();
  }
  if (problems.length > 0) {
    for (const problem of problems) console.error(`check_page: FAIL: ${problem}`);
    process.exit(1);
  }
  console.log('check_page: ok');
}

// The whole page, else its first screen. Chromium now and then never finishes a screenshot (microsoft/playwright#28995):
// a second try, then the first screen only, each bounded.
async function takeScreenshot(page, path) {
  const tries = [{ fullPage: true }, { fullPage: true }, { fullPage: false }];
  for (const [i, options] of tries.entries()) {
    try {
      await page.screenshot({ path, ...options, timeout: 30000 });
      return true;
    } catch (error) {
      const what = options.fullPage ? 'full page' : 'first screen';
      console.log(`check_page: screenshot ${i + 1} of ${tries.length} (${what}) not taken: ` +
        error.message.split('\n')[0]);
    }
  }
  return false;
}

main().catch((error) => {
  console.error(`check_page: FAIL: ${error.stack || error}`);
  process.exit(1);
});
