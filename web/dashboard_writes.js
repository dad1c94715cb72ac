// The dashboard's forms that write a study's decision log: a note (as `dltune note`) and a decision (as `dltune
// decide`), sent to /api/studies/NAME/notes and /decisions (src/report/dashboard_writes.cc) with the token of the
// page's address (?token=...) in the X-Dltune-Token header, which the server requires of every write. Loaded before
// dashboard.js, which places the forms (decisionLogForms) and refreshes the page after a write.
'use strict';

const writeToken = new URLSearchParams(location.search).get('token');
const writeForms = new Map();  // study (and trial) → its forms, kept across redraws so that typed text survives polls
// Whether the server takes writes (false: dltune serve --read-only), asked once; forms stay hidden until it answers.
const writesServed = fetch('/api/writes', { cache: 'no-store' }).then((response) => response.json())
  .then((answer) => answer.writes === true).catch(() => true);
const writeHint = 'Notes and decisions are written from the address dltune serve printed (it ends in ?token=…), or '
  + 'with dltune note and dltune decide.';

function writeElement(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) node.setAttribute(key, value);
  node.append(...children);
  return node;
}

// Sends `body` to the study's `what` (notes, decisions); the answer's JSON, or an Error with the server's message.
async function writeDecisionLog(study, what, body) {
  const response = await fetch(`/api/studies/${encodeURIComponent(study)}/${what}`, {
    method: 'POST', cache: 'no-store', body: JSON.stringify(body),
    headers: { 'Content-Type': 'application/json', 'X-Dltune-Token': writeToken },
  });
  const answer = await response.json().catch(() => ({}));
  if (!response.ok) throw new Error(answer.error || `${response.status} ${response.statusText}`);
  return answer;
}

// The forms that add a note to `study` and record a decision on it (adopting trial `trial` by default, on a trial's
// page); `onWritten` is called after each write that succeeded. Without a token in the page's address, a line that
// says where to write from instead.
function decisionLogForms(study, trial, onWritten) {
  if (!writeToken) return writeElement('p', { class: 'muted write-hint' }, writeHint);
  const key = `${study}\n${trial ?? ''}`;
  if (writeForms.has(key)) return writeForms.get(key);
  const status = writeElement('p', { class: 'write-status', role: 'status', 'aria-live': 'polite' });
  const field = (tag, name, placeholder, value) => {
    const input = writeElement(tag, { name, placeholder, 'aria-label': placeholder });
    if (value) input.value = value;
    return input;
  };
  const form = (what, title, fields, button, bodyOf) => {
    const node = writeElement('form', { class: 'write-form', 'data-write': what }, writeElement('h3', {}, title),
      ...fields, writeElement('button', { type: 'submit' }, button));
    node.addEventListener('submit', async (event) => {
      event.preventDefault();
      const submit = node.querySelector('button');
      submit.disabled = true;
      status.className = 'write-status';
      status.textContent = 'Recording…';
      try {
        const answer = await writeDecisionLog(study, what, bodyOf(node.elements));
        for (const input of fields) input.value = input.dataset.initial || '';
        status.textContent = `Recorded: ${answer.summary}`;
        onWritten();
      } catch (error) {
        status.className = 'write-status error';
        status.textContent = `Not recorded: ${error.message}`;
      } finally {
        submit.disabled = false;
      }
    });
    return node;
  };
  const adopt = field('input', 'adopt', 'what to adopt: 12, trial:12 or configuration:3',
    trial === null || trial === undefined ? '' : `trial:${trial}`);
  adopt.dataset.initial = adopt.value;
  const noteFields = [field('textarea', 'text', 'a note: what you saw, suspect or will try next'),
    field('input', 'resolves', 'the finding it marks handled (optional: its id)')];
  const decisionFields = [adopt, field('input', 'because', 'why it is adopted')];
  const box = writeElement('section', { class: 'write-forms' },
    form('notes', `Add a note to study ${study}`, noteFields, 'Add note', (f) => (f.resolves.value
      ? { text: f.text.value, resolves: f.resolves.value } : { text: f.text.value })),
    form('decisions', 'Record a decision', decisionFields, 'Record decision',
      (f) => ({ adopt: f.adopt.value, because: f.because.value })),
    status);
  box.hidden = true;
  writesServed.then((writes) => {
    if (!writes) {
      box.replaceChildren(writeElement('p', { class: 'muted write-hint' }, 'This dashboard is read-only (dltune '
        + 'serve --read-only): write notes and decisions with dltune note and dltune decide.'));
    }
    box.hidden = false;
  });
  writeForms.set(key, box);
  return box;
}
