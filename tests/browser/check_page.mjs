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
//   --forbid-text TEXT     TEXT must not appear in the page as text (repeatable), e.g. a section's empty text
//   --readable-charts      every chart can be read (from its Vega scene graph, whichever renderer drew it): the tick
//                          labels of an axis do not overlap, no text is in exponent notation ("1.5e+2"), text and bars
//                          drawn as data stay inside the plot (not over its axes), a series of one point draws a
//                          dot, and no chart nor the page runs past what shows it (cut off, or scrolled sideways)
//   --viewport WxH         the browser window's size in CSS pixels (default 1280x900)
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
    '[--then-wait-for TEXT] [--forbid-text TEXT]... [--readable-charts] [--viewport WxH]');
  process.exit(2);
}

function parseArgs(argv) {
  const options = { selector: '.chart', minCharts: 1, expectTexts: [], forbidSelectors: [], allowWarnings: false,
    allowOrigins: [], timeout: 30000, thenWaitFor: null, forbidTexts: [], readableCharts: false,
    viewport: { width: 1280, height: 900 }, positional: [] };
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
    else if (arg === '--forbid-text') options.forbidTexts.push(value());
    else if (arg === '--readable-charts') options.readableCharts = true;
    else if (arg === '--viewport') {
      const match = /^(\d+)x(\d+)$/.exec(value());
      if (!match) usage('--viewport must be WIDTHxHEIGHT, e.g. 1400x900');
      options.viewport = { width: Number(match[1]), height: Number(match[2]) };
    }
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
    const page = await browser.newPage({ viewport: options.viewport });
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
    for (const forbidden of options.forbidTexts) {
      if (text.includes(forbidden)) problems.push(`text shown on the page that must not be: ${JSON.stringify(forbidden)}`);
    }
    if (options.readableCharts) {
      for (const problem of await page.evaluate(unreadable, options.selector)) problems.push(problem);
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

// What makes the charts matching `selector` hard to read, one line per problem; runs in the page. Each chart's element
// (or one inside it) holds its Vega view as `vegaView` (web/report.js, web/dashboard.js): the scene graph gives every
// drawn item's bounds whichever renderer drew it. Bounds are in the coordinates of the item's group; the absolute ones
// add the groups' offsets. The plot is the root group's rectangle (0, 0, width, height).
function unreadable(selector) {
  const problems = [];
  const viewOf = (box) => [box, ...box.querySelectorAll('*')].map((e) => e.vegaView).find(Boolean);
  const overlap = (a, b) => Math.min(a.x2, b.x2) - Math.max(a.x1, b.x1) > 0.5 &&
    Math.min(a.y2, b.y2) - Math.max(a.y1, b.y1) > 0.5;
  const round = (b) => `[${[b.x1, b.y1, b.x2, b.y2].map((v) => Math.round(v)).join(', ')}]`;
  for (const box of document.querySelectorAll(selector)) {
    const name = box.id || box.dataset.chart || box.className;
    const view = viewOf(box);
    if (!view) { problems.push(`${name}: no Vega view to read`); continue; }
    const root = view.scenegraph().root.items[0];
    const plot = { x1: 0, y1: 0, x2: root.width || 0, y2: root.height || 0 };
    const axes = new Map();  // axis group item → its visible labels
    const lines = [];        // the points of lines drawn through a single point
    const dots = [];         // the centres of symbols
    const walk = (scene, ox, oy, axis) => {
      for (const item of scene.items || []) {
        const b = item.bounds;
        const at = b ? { x1: ox + b.x1, y1: oy + b.y1, x2: ox + b.x2, y2: oy + b.y2 } : null;
        const visible = item.opacity !== 0 && item.fillOpacity !== 0;
        if (scene.marktype === 'text' && visible && item.text !== undefined && item.text !== '') {
          const text = [].concat(item.text).join(' ');
          if (/\de\+\d/.test(text)) problems.push(`${name}: ${scene.role} in exponent notation: "${text}"`);
          if (scene.role === 'axis-label' && axis) axes.get(axis).push({ text, at });
          if (scene.role === 'mark' && at && !(at.x1 >= plot.x1 - 1 && at.x2 <= plot.x2 + 1 &&
              at.y1 >= plot.y1 - 1 && at.y2 <= plot.y2 + 1)) {
            problems.push(`${name}: text "${text}" at ${round(at)} runs out of the plot ${round(plot)}`);
          }
        }
        if (scene.marktype === 'rect' && scene.role === 'mark' && visible && at &&
            !(at.x1 >= plot.x1 - 1 && at.x2 <= plot.x2 + 1 && at.y1 >= plot.y1 - 1 && at.y2 <= plot.y2 + 1)) {
          problems.push(`${name}: a bar at ${round(at)} runs out of the plot ${round(plot)}`);
        }
        if (scene.marktype === 'symbol' && scene.role === 'mark') dots.push({ x: ox + item.x, y: oy + item.y });
        if (scene.marktype === 'group') {
          const childAxis = scene.role === 'axis' ? item : axis;
          if (scene.role === 'axis' && !axes.has(item)) axes.set(item, []);
          for (const child of item.items || []) walk(child, ox + (item.x || 0), oy + (item.y || 0), childAxis);
        }
      }
      if (scene.marktype === 'line' && scene.role === 'mark') {
        const drawn = (scene.items || []).filter((i) => Number.isFinite(i.x) && Number.isFinite(i.y));
        if (drawn.length === 1) lines.push({ x: ox + drawn[0].x, y: oy + drawn[0].y });
      }
    };
    walk(view.scenegraph().root, 0, 0, null);
    for (const labels of axes.values()) {
      for (let i = 0; i < labels.length; ++i) {
        for (let j = i + 1; j < labels.length; ++j) {
          if (labels[i].at && labels[j].at && overlap(labels[i].at, labels[j].at)) {
            problems.push(`${name}: tick labels "${labels[i].text}" and "${labels[j].text}" overlap`);
          }
        }
      }
    }
    for (const point of lines) {
      if (!dots.some((d) => Math.abs(d.x - point.x) < 2 && Math.abs(d.y - point.y) < 2)) {
        problems.push(`${name}: a series of one point at (${Math.round(point.x)}, ${Math.round(point.y)}) draws nothing`);
      }
    }
    // The drawing within what shows it: the nearest element that clips or scrolls, else the window.
    const drawing = box.querySelector('svg, canvas');
    if (drawing) {
      let clip = drawing.parentElement;
      while (clip && getComputedStyle(clip).overflowX === 'visible') clip = clip.parentElement;
      const right = clip && clip !== document.documentElement && clip !== document.body
        ? clip.getBoundingClientRect().left + clip.clientWidth : document.documentElement.clientWidth;
      const drawn = drawing.getBoundingClientRect();
      if (drawn.right > right + 1) {
        problems.push(`${name}: the chart is ${Math.round(drawn.right - right)} px wider than what shows it (cut off)`);
      }
    }
  }
  if (document.documentElement.scrollWidth > document.documentElement.clientWidth + 1) {
    problems.push(`the page is ${document.documentElement.scrollWidth - document.documentElement.clientWidth} px ` +
      'wider than the window: part of it is cut off');
  }
  return problems;
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
