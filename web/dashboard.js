// The dltune dashboard: renders the JSON of /api/... (src/report/dashboard_api.cc) and polls it while trials run.
// Every value from the store is inserted as text (textContent), never as markup.
'use strict';

const main = document.getElementById('main');
const crumbs = document.getElementById('crumbs');
const statusLine = document.getElementById('status');
const POLL_MS = 3000;
let lastShown = '';  // the JSON last rendered, to redraw only on change
let pollTimer = null;
const TRIAL_ROWS = 500;  // rows of a study's trial table drawn until the reader asks for all of them
let allTrialRows = false;

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (key === 'class') node.className = value;
    else if (key === 'onclick') node.addEventListener('click', value);
    else node.setAttribute(key, value);
  }
  for (const child of children) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function fmt(value) {
  if (value === null || value === undefined) return '-';
  if (typeof value === 'number') return Number.isInteger(value) ? String(value) : value.toPrecision(4);
  return String(value);
}

function time(seconds) {
  return seconds ? new Date(seconds * 1000).toLocaleString() : '-';
}

function statesText(states) {
  const parts = Object.entries(states || {}).filter(([, n]) => n > 0).map(([s, n]) => `${n} ${s}`);
  return parts.length ? parts.join(', ') : 'no trials';
}

function table(headers, rows, onRowClick) {
  const head = el('tr', {}, ...headers.map((h) => el('th', {}, h)));
  const body = rows.map((row, i) => {
    const tr = el('tr', onRowClick ? { class: 'clickable', onclick: () => onRowClick(i) } : {},
      ...row.map((cell) => (cell instanceof Node ? el('td', {}, cell) :
        el('td', typeof cell === 'number' ? { class: 'num' } : {}, fmt(cell)))));
    return tr;
  });
  return el('table', {}, el('thead', {}, head), el('tbody', {}, ...body));
}

function setCrumbs(...parts) {
  crumbs.replaceChildren(...parts.flatMap((p, i) => [i ? el('span', { class: 'muted' }, '›') : null,
    p.href ? el('a', { href: p.href }, p.text) : el('span', {}, p.text)]).filter(Boolean));
}

// The document at `path`, or null when its text is the one last shown (nothing to parse or redraw).
async function fetchChanged(path) {
  const response = await fetch(path, { cache: 'no-store' });
  const text = await response.text();
  if (response.ok && text === lastShown) return null;
  const json = JSON.parse(text);
  if (!response.ok) throw new Error(json.error || response.statusText);
  lastShown = text;
  return json;
}

let chartObserver = null;  // draws each chart of the page shown when it comes near the screen
const chartsToDraw = new Map();  // chart box → its chart, until drawn

// Starts a page's charts afresh (none drawn, none waiting).
function resetCharts() {
  if (chartObserver) chartObserver.disconnect();
  chartsToDraw.clear();
  chartObserver = new IntersectionObserver((entries) => {
    for (const entry of entries) {
      const chart = chartsToDraw.get(entry.target);
      if (!entry.isIntersecting || !chart) continue;
      chartsToDraw.delete(entry.target);
      chartObserver.unobserve(entry.target);
      // Canvas draws large studies faster than SVG; actions (the export menu) off.
      // The chart's element keeps its view (for the console, and the browser tests that read what it drew).
      const body = entry.target.querySelector('.chart-body');
      vegaEmbed(body, chart.spec, { renderer: 'canvas', actions: false })
        .then((result) => { body.vegaView = result.view; })
        .catch((error) => { entry.target.append(el('p', {}, `Could not draw this chart: ${error.message}`)); });
    }
  }, { rootMargin: '200px 0px' });
}

// Adds a box per chart to `container` and draws each one when it comes near (200 px) the visible part of the page:
// a study of 10,000 trials shows its first charts at once instead of freezing the tab until the last one has drawn.
function addCharts(container, charts) {
  for (const chart of charts || []) {
    const box = el('div', { class: chart.wide ? 'chart wide' : 'chart', 'data-chart': chart.id }, el('h4', {}, chart.title),
      el('div', { class: 'chart-body' }));
    container.append(box);
    chartsToDraw.set(box, chart);
    chartObserver.observe(box);
  }
}

// The sections of the study page model (src/report/study_page.cc), as the report shows them: a title, what to look
// for, and the charts — or the text that says why there are none.
function addSections(container, sections) {
  for (const section of sections || []) {
    const charts = el('div', { class: 'charts' });
    const box = el('section', { id: `section-${section.id}`, class: 'page-section', 'data-position': section.position },
      el('h3', {}, section.title), el('p', { class: 'muted explain' }, section.explanation), charts);
    // In the page's order, also when the sections of the measurements arrive after the others.
    const next = [...container.children].find((other) => Number(other.dataset.position) > section.position);
    container.insertBefore(box, next || null);
    if (!section.charts.length && !section.more_charts.length && !(section.folded_charts || []).length) {
      charts.append(el('p', { class: 'muted empty' }, section.empty));
      continue;
    }
    addCharts(charts, section.charts);
    if (section.more_charts.length) {
      const more = el('div', { class: 'charts' });
      box.append(el('h4', {}, section.more_title), more);
      addCharts(more, section.more_charts);
    }
    // Folded away until opened (per-class charts): drawn when they come into view, as the others.
    if ((section.folded_charts || []).length) {
      const folded = el('div', { class: 'charts' });
      box.append(el('details', { class: 'folded' }, el('summary', {}, section.folded_title), folded));
      addCharts(folded, section.folded_charts);
    }
  }
}

// The findings, most serious first; one a note marks handled (dltune note --resolves) as doctor shows it: handled,
// by that note, without its evidence and suggestion.
function diagnosticsList(diagnostics) {
  if (!diagnostics.length) return el('p', { class: 'muted' }, 'No finding.');
  return el('div', {}, ...diagnostics.map((d) => {
    const severity = d.handled ? 'handled' : d.severity;
    const head = el('div', {}, el('span', { class: 'severity' }, severity), el('span', { class: 'title' }, d.title),
      d.substudy ? el('span', { class: 'muted' }, ` [${d.substudy}]`) : null);
    if (d.handled) {
      return el('div', { class: 'diagnostic handled', 'data-finding': d.id }, head,
        el('div', { class: 'muted' }, `Marked handled by ${d.handled} (${d.id})`));
    }
    return el('div', { class: `diagnostic ${d.severity}`, 'data-finding': d.id }, head,
      el('div', {}, d.detail), el('div', {}, `Suggestion: ${d.suggestion}`),
      el('div', { class: 'muted' }, `Playbook: “${d.section}”`));
  }));
}

function showStudies(data) {
  setCrumbs({ text: 'studies' });
  // A throughput sweep's result is the batch size it recommends, never a best validation error.
  const rows = data.studies.map((s) => [s.name, s.description, statesText(s.states),
    s.result ?? (s.best ? `${fmt(s.best.value)} (trial ${s.best.trial})` : '-'), time(s.updated_at)]);
  main.replaceChildren(el('h1', {}, 'Studies'), el('p', { class: 'muted' }, data.store),
    data.studies.length ? table(['study', 'description', 'trials', 'best', 'updated'], rows,
      (i) => { location.hash = `#/study/${encodeURIComponent(data.studies[i].name)}`; })
      : el('p', {}, 'This store has no studies yet. Run one with: dltune run study.yaml'));
}

// A best trial as the report says it: its value (a mean with its interval when replicas exist), trial and step.
function bestText(b) {
  return `${b.text} — trial ${b.trial}${b.replicas ? ' (median replica)' : ''}, step ${fmt(b.step)}`;
}

async function showStudy(data) {
  setCrumbs({ text: 'studies', href: '#/' }, { text: data.name });
  const facts = [['description', data.description], ...(data.goal ? [['goal', data.goal]] : []), ['spec', `${data.spec_path} (sha256 ${data.spec_hash.slice(0, 12)})`],
    ['created', `${time(data.created_at)} by dltune ${data.dltune_version}${data.git_commit ? `, commit ${data.git_commit}${data.git_dirty ? ' with uncommitted changes' : ''}` : ''}`],
    ['objective', `${data.direction} ${data.objective}`], ['max_train_steps', data.max_train_steps],
    ['trials', statesText(data.states)],
    data.result ? ['batch size', data.result] : ['best', data.best ? bestText(data.best) : '-']];
  for (const b of data.best_per_substudy || []) facts.push([`  ${b.substudy}`, bestText(b)]);
  // Lineage, decisions and launches: where the study comes from, what was decided, what was launched.
  const studyLink = (name) => el('a', { href: `#/study/${encodeURIComponent(name)}` }, name);
  if (data.parent) facts.push(['planned from', el('span', {}, studyLink(data.parent), ` (dltune plan ${data.procedure})`)]);
  if (data.children.length) {
    facts.push(['planned from it', el('span', {}, ...data.children.flatMap((c, i) => (i ? [', ', studyLink(c)] : [studyLink(c)])))]);
  }
  for (const n of data.notes) {
    facts.push([`${n.kind} ${time(n.created_at)}`, `${n.kind === 'decision' ? `adopt ${n.adopt}: ` : ''}${n.text}${n.author ? ` (${n.author})` : ''}`]);
  }
  for (const l of data.launches) {
    const metric = l.metrics[data.objective.split('/').pop()];
    facts.push([`launch ${l.id}`, `${time(l.created_at)} by ${l.author}: trial ${l.trial} at step ${l.step}, test ${fmt(metric)}; ${l.reason} — model ${l.export_path}`]);
  }
  if (data.test_evaluations) facts.push(['test evaluations', `${data.test_evaluations} (the playbook checks the test set once)`]);
  const diagnosticsBox = el('div', {}, el('p', { class: 'muted' }, 'Reading the measurements…'));
  const chartBox = el('div', {});
  const paramNames = [...new Set(data.trials.flatMap((t) => Object.keys(t.params)))];
  const listed = allTrialRows ? data.trials : data.trials.slice(0, TRIAL_ROWS);
  const replicated = data.replicas > 1;
  const rows = listed.map((t) => [t.number, ...(replicated ? [t.configuration, t.replica] : []), t.substudy,
    el('span', { class: `state-${t.state}` }, t.state), t.best, t.best_step, t.final, ...paramNames.map((p) => t.params[p])]);
  const more = listed.length < data.trials.length
    ? el('p', {}, `First ${listed.length} of ${data.trials.length} trials. `,
      el('button', { id: 'all-trials', onclick: () => { allTrialRows = true; showStudy(data); } }, 'Show all'))
    : '';
  main.replaceChildren(el('h1', {}, data.name),
    el('table', { class: 'facts' }, el('tbody', {}, ...facts.map(([k, v]) => el('tr', {}, el('td', {}, k), el('td', {}, v instanceof Node ? v : fmt(v)))))),
    decisionLogForms(data.name, null, refreshAfterWrite),  // dashboard_writes.js
    el('h2', {}, 'Diagnostics'), diagnosticsBox,
    el('h2', {}, 'Charts'), chartBox,
    el('h2', {}, 'Trials'), table(['trial', ...(replicated ? ['config', 'replica'] : []), 'sub-study', 'state', 'best', 'best step', 'final', ...paramNames], rows,
      (i) => { location.hash = `#/study/${encodeURIComponent(data.name)}/trial/${listed[i].number}`; }), more);
  resetCharts();
  addSections(chartBox, data.sections);
  // Then what needs the measurements: the diagnostics, the training curves and gradient norms. The page says it is
  // busy until they are in.
  main.setAttribute('aria-busy', 'true');
  try {
    const response = await fetch(`/api/studies/${encodeURIComponent(data.name)}/measurements`, { cache: 'no-store' });
    const measurements = await response.json();
    if (!response.ok) throw new Error(measurements.error || response.statusText);
    diagnosticsBox.replaceChildren(diagnosticsList(measurements.diagnostics));
    addSections(chartBox, measurements.sections);
  } catch (error) {
    diagnosticsBox.replaceChildren(el('p', {}, `Could not read the measurements: ${error.message}`));
  } finally {
    main.removeAttribute('aria-busy');
  }
}

async function showTrial(data) {
  setCrumbs({ text: 'studies', href: '#/' }, { text: data.study, href: `#/study/${encodeURIComponent(data.study)}` },
    { text: `trial ${data.number}` });
  const facts = [['sub-study', data.substudy], ['state', data.state], ['reason', data.reason], ['worker', data.worker],
    ['retries', data.retries], ['started', time(data.started_at)], ['ended', time(data.ended_at)],
    ['best', data.best], ['best step', data.best_step], ['final', data.final], ['exit status', data.exit_status],
    ['GPU', data.gpu], ['fused', data.fused]];
  const params = Object.entries(data.params).map(([k, v]) => [k, v]);
  const checkpoints = data.checkpoints.map((c) => [c.step, c.pool, c.objective, c.deleted ? 'deleted' : c.path]);
  const chartBox = el('div', {});
  // The trial's profile trace (training.profile_steps), when it wrote one: served by dltune serve, to open in Perfetto.
  const trace = data.profile_trace;
  const traceBox = trace ? el('p', { class: 'profile-trace' }, `Steps ${trace.steps || '?'}: `,
    el('a', { href: `/api/studies/${encodeURIComponent(data.study)}/trials/${data.number}/profile.trace.json`,
      download: `trial_${data.number}.profile.trace.json` }, 'download the trace'),
    trace.bytes === null ? '' : ` (${(trace.bytes / 1e6).toFixed(1)} MB)`, ', then open it in ',
    el('a', { href: 'https://ui.perfetto.dev', target: '_blank', rel: 'noopener noreferrer' }, 'ui.perfetto.dev'),
    ' or chrome://tracing. On this machine: ', el('code', {}, trace.path)) : null;
  main.replaceChildren(...[el('h1', {}, `Trial ${data.number}`),
    el('table', { class: 'facts' }, el('tbody', {}, ...facts.filter(([, v]) => v !== '' && v !== null && v !== undefined)
      .map(([k, v]) => el('tr', {}, el('td', {}, k), el('td', {}, fmt(v)))))),
    decisionLogForms(data.study, data.number, refreshAfterWrite),
    el('h2', {}, 'Params'), table(['param', 'value'], params),
    el('h2', {}, 'Curves'), chartBox,
    el('h2', {}, 'Checkpoints'), checkpoints.length ? table(['step', 'pool', 'objective', 'path'], checkpoints) : el('p', { class: 'muted' }, 'None.'),
    traceBox ? el('h2', {}, 'Profile trace') : null, traceBox,
    data.stderr_tail ? el('h2', {}, 'Last lines of stderr') : null,
    data.stderr_tail ? el('pre', {}, data.stderr_tail) : null].filter(Boolean));
  resetCharts();
  addSections(chartBox, data.sections);
}

async function route() {
  clearTimeout(pollTimer);
  const parts = location.hash.replace(/^#\/?/, '').split('/').map(decodeURIComponent);
  let path; let render;
  if (parts[0] === 'study' && parts.length >= 4 && parts[2] === 'trial') {
    path = `/api/studies/${encodeURIComponent(parts[1])}/trials/${encodeURIComponent(parts[3])}`; render = showTrial;
  } else if (parts[0] === 'study' && parts[1]) {
    path = `/api/studies/${encodeURIComponent(parts[1])}`; render = showStudy;
  } else {
    path = '/api/studies'; render = showStudies;
  }
  try {
    const data = await fetchChanged(path);
    if (data !== null) await render(data);
    statusLine.textContent = `updated ${new Date().toLocaleTimeString()}`;
  } catch (error) {
    lastShown = '';  // draw again at the next poll that answers
    main.replaceChildren(el('p', {}, `Could not load ${path}: ${error.message}`));
    statusLine.textContent = 'not connected';
  }
  pollTimer = setTimeout(route, POLL_MS);
}

// After a note or decision is recorded: the page's document again, whether or not a poll is due.
function refreshAfterWrite() { lastShown = ''; route(); }

window.addEventListener('hashchange', () => { lastShown = ''; allTrialRows = false; route(); });
route();
