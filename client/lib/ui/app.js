// app.js — the annotator's page. It talks only to the local ldpref process
// that served it (same origin). Task text is rendered by building DOM nodes
// with textContent, never parsed as HTML, so HTML in a task shows as text.
'use strict';

const $ = (id) => document.getElementById(id);
let task = null;
let busy = false;

// The session: the address ldpref ui printed carries a one-time token
// (?token=, or #token=). It leaves the address bar at once, and is
// exchanged once for a session secret kept in sessionStorage, which is
// scoped to this origin (port included) and this tab: a reload keeps it,
// another tab or site does not have it. No cookies.
const SESSION = 'ldpref_session';

async function openSession() {
  const token = new URLSearchParams(location.search).get('token') ||
                new URLSearchParams(location.hash.slice(1)).get('token');
  if (location.search || location.hash) history.replaceState(null, '', '/');
  if (token) {
    const r = await fetch('/api/session', {
      method: 'POST', headers: { 'X-Ldpref-Token': token }, credentials: 'omit',
      cache: 'no-store',
    });
    const j = await r.json();
    if (r.ok && j.session) {
      sessionStorage.setItem(SESSION, j.session);
      return;
    }
    // The same link opened again in this tab: its session still holds.
    if (sessionStorage.getItem(SESSION)) return;
    throw new Error((j.error || r.status) + ': ' + (j.message || ''));
  }
  if (!sessionStorage.getItem(SESSION))
    throw new Error('unauthorized: open the page with the address ldpref ui printed');
}

async function call(method, path, body) {
  const opts = { method, headers: {}, credentials: 'omit', cache: 'no-store' };
  const session = sessionStorage.getItem(SESSION);
  if (session) opts.headers['X-Ldpref-Session'] = session;
  if (body !== undefined) {
    opts.headers['Content-Type'] = 'application/json';
    opts.body = JSON.stringify(body);
  }
  const r = await fetch(path, opts);
  const j = await r.json();
  if (!r.ok) throw new Error((j.error || r.status) + ': ' + (j.message || ''));
  return j;
}

function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}

// Inline markup: `code` and **bold**; everything else is text.
function inline(parent, text) {
  const re = /(`[^`\n]+`|\*\*[^*\n]+\*\*)/g;
  let last = 0, m;
  while ((m = re.exec(text)) !== null) {
    if (m.index > last) parent.appendChild(document.createTextNode(text.slice(last, m.index)));
    const tok = m[0];
    parent.appendChild(tok[0] === '`' ? el('code', null, tok.slice(1, -1))
                                      : el('strong', null, tok.slice(2, -2)));
    last = m.index + tok.length;
  }
  if (last < text.length) parent.appendChild(document.createTextNode(text.slice(last)));
}

// A small Markdown-ish renderer: fenced code, bullet and numbered lists,
// paragraphs. Builds nodes; never parses HTML.
function render(parent, text) {
  parent.replaceChildren();
  const lines = String(text).split('\n');
  let i = 0;
  while (i < lines.length) {
    const line = lines[i];
    if (line.startsWith('```')) {
      const code = [];
      for (i++; i < lines.length && !lines[i].startsWith('```'); i++) code.push(lines[i]);
      i++;
      const pre = el('pre');
      pre.appendChild(el('code', null, code.join('\n')));
      parent.appendChild(pre);
      continue;
    }
    const item = /^\s*([-*]|\d+[.)])\s+/;
    if (item.test(line)) {
      const ordered = /^\s*\d/.test(line);
      const list = el(ordered ? 'ol' : 'ul');
      for (; i < lines.length && item.test(lines[i]); i++) {
        const li = el('li');
        inline(li, lines[i].replace(item, ''));
        list.appendChild(li);
      }
      parent.appendChild(list);
      continue;
    }
    if (line.trim() === '') { i++; continue; }
    const para = [];
    for (; i < lines.length && lines[i].trim() !== '' && !lines[i].startsWith('```') &&
           !item.test(lines[i]); i++) para.push(lines[i]);
    const p = el('p');
    inline(p, para.join('\n'));
    parent.appendChild(p);
  }
}

function eps(x) { return x === null ? '∞' : String(Number((+x).toPrecision(3))); }

function showError(e) {
  const box = $('error');
  box.textContent = String(e && e.message ? e.message : e);
  box.hidden = false;
}

function showTask(t) {
  task = t;
  $('task-id').textContent = String(t.task_id);
  $('task-eps').textContent = t.sends_true_answer ? 'your true answer is sent'
                                                  : 'ε per answer ≤ ' + eps(t.epsilon);
  const central = $('central');
  central.hidden = t.trust !== 'central';
  central.textContent = t.trust !== 'central' ? '' : t.sends_true_answer
    ? 'Central campaign: your answer is sent as it is, not randomized. The server sees your ' +
      'true answer; only the models it releases through a differentially private mechanism ' +
      'are private.'
    : 'Central campaign: the server would see your true answer; only its released models are ' +
      'private. This device does not send true answers: your ε caps are finite.';
  const conv = $('conversation');
  conv.replaceChildren();
  for (const turn of (t.context || [])) {
    const d = el('div', 'turn');
    d.appendChild(el('div', 'role', turn.role));
    const body = el('div', 'text');
    render(body, turn.content);
    d.appendChild(body);
    conv.appendChild(d);
  }
  const p = el('div', 'turn prompt');
  p.appendChild(el('div', 'role', 'user'));
  const body = el('div', 'text');
  render(body, t.prompt);
  p.appendChild(body);
  conv.appendChild(p);
  render($('text-a'), t.a);
  render($('text-b'), t.b);
  $('task').hidden = false;
  $('done').hidden = true;
  window.scrollTo(0, 0);
}

function showDone(reason, message) {
  task = null;
  $('task').hidden = true;
  const d = $('done');
  d.replaceChildren();
  const text = {
    campaign_complete: 'The campaign is complete: every task has all its labels. Thank you!',
    quota_reached: 'You have reached your quota for this campaign. Thank you!',
    no_task_available: 'No task is available for you right now. Try again later.',
  }[reason] || message || 'Nothing to do.';
  d.appendChild(el('p', null, text));
  if (reason === 'no_task_available') {
    const again = el('button', null, 'Check again');
    again.type = 'button';
    again.addEventListener('click', () => loadTask().then(loadProgress));
    d.appendChild(again);
  }
  d.hidden = false;
}

async function loadTask() {
  try {
    const r = await call('GET', '/api/task');
    if (r.task) showTask(r.task); else showDone(r.reason, r.message);
  } catch (e) { showError(e); }
}

async function loadProgress() {
  try {
    const r = await call('GET', '/api/progress');
    const p = r.progress, s = r.session;
    let text = s.answered + ' answered this session';
    if (s.skipped) text += ', ' + s.skipped + ' skipped';
    if (p) {
      text = p.tasks_complete + ' of ' + p.tasks_total + ' tasks complete in ' + p.campaign +
             '; ' + text;
      if (p.annotator_quota !== null) text += ' (your quota ' + p.annotator_labels + ' of ' +
                                              p.annotator_quota + ')';
    }
    $('progress').textContent = text;
    const b = r.budget;
    if (b) {
      const meter = $('eps-meter');
      meter.max = b.max_epsilon_total === null ? Math.max(1, b.spent) : b.max_epsilon_total;
      meter.value = b.spent;
      $('eps-text').textContent = eps(b.spent) + ' of ' + eps(b.max_epsilon_total) +
                                  ' (left ' + (b.max_epsilon_total === null ? '∞' :
                                  eps(Math.max(0, b.max_epsilon_total - b.spent))) + ')';
    }
  } catch (e) { showError(e); }
}

function notice(text) {
  const n = $('notice');
  n.textContent = text;
  n.hidden = false;
}

async function act(kind, choice) {
  if (!task || busy) return;
  busy = true;
  $('error').hidden = true;
  for (const b of document.querySelectorAll('.actions button')) b.disabled = true;
  const id = task.task_id;
  try {
    if (kind === 'skip') {
      await call('POST', '/api/skip', { task_id: id });
      notice('Task ' + id + ' skipped: nothing was sent about your preference and no ε was ' +
             'spent. The server will not offer it to you again (it knows you skipped it).');
    } else {
      const r = await call('POST', '/api/answer', { task_id: id, choice });
      const z = r.receipt.z === 1 ? 'B' : 'A';
      notice(r.already_answered
        ? 'Task ' + id + ' was already answered on this device; a randomized answer can never ' +
          'be changed or repeated, or repeated questions would reveal your true preference.'
        : r.receipt.epsilon === null
        ? 'Task ' + id + ': your true answer "' + z + '" was sent as it is (ε = ∞): the server ' +
          'sees it; only the models it releases are private.'
        : 'Task ' + id + ': your answer was randomized on this device before sending (ε = ' +
          eps(r.receipt.epsilon) + '); the server received "' + z + '", which may be the ' +
          'other choice — that is how your privacy is protected.');
    }
    await loadTask();
    await loadProgress();
  } catch (e) {
    showError(e);
    await loadTask();
  } finally {
    busy = false;
    for (const b of document.querySelectorAll('.actions button')) b.disabled = false;
  }
}

function toggleHelp() { $('help').hidden = !$('help').hidden; }

document.addEventListener('keydown', (ev) => {
  // A held key answers once, not the next tasks too.
  if (ev.ctrlKey || ev.metaKey || ev.altKey || ev.repeat) return;
  const k = ev.key;
  if (k === '1' || k === 'a') act('answer', 'a');
  else if (k === '2' || k === 'b') act('answer', 'b');
  else if (k === 't') act('answer', 't');
  else if (k === 's') act('skip');
  else if (k === '?') toggleHelp();
  else return;
  ev.preventDefault();
});

document.addEventListener('DOMContentLoaded', () => {
  $('btn-a').addEventListener('click', () => act('answer', 'a'));
  $('btn-b').addEventListener('click', () => act('answer', 'b'));
  $('btn-t').addEventListener('click', () => act('answer', 't'));
  $('btn-s').addEventListener('click', () => act('skip'));
  $('btn-help').addEventListener('click', toggleHelp);
  openSession().then(() => loadTask().then(loadProgress), showError);
});
