// tasks.js — upload a task file into the selected campaign, page through
// its tasks, and see one task with its label count.
import * as api from './api.js';
import { h, table, card, facts, num } from './dom.js';

const PAGE = 50;
let offset = 0;
let shown = null; // the task id shown in detail


function turnsView(turns) {
  return h('div', { class: 'turns' }, (turns || []).map((t) => h('div', { class: 'turn' },
    h('div', { class: 'role' }, t.role), h('div', { class: 'text' }, t.content))));
}

function response(t, i) {
  const r = t.responses ? t.responses[i] : undefined;
  const text = typeof r === 'string' ? r : r && r.content !== undefined ? r.content : r && r.text !== undefined ? r.text : JSON.stringify(r ?? null);
  return h('div', { class: 'response' }, h('h3', {}, `Response ${i === 0 ? 'A (0)' : 'B (1)'}`), h('div', { class: 'text' }, text));
}

async function detail(ctx, id) {
  const t = await api.get(`/v1/tasks/one${api.query({ id })}`);
  return card(`Task ${t.id ?? id}`,
    facts([
      ['Labels', `${num(t.labels)}${t.labels_needed !== undefined ? ' / ' + num(t.labels_needed) : ''}`],
      ['Skips', num(t.skips)],
      ['Gold answer', t.gold ?? 'none'],
      ['Source id', t.source_id ?? '—'],
    ], { id: 'task-detail' }),
    t.context && t.context.length ? h('div', {}, h('h3', {}, 'Conversation before the prompt'), turnsView(t.context)) : '',
    h('h3', {}, 'Prompt'), h('div', { class: 'text prompt' }, t.prompt),
    h('div', { class: 'pair' }, response(t, 0), response(t, 1)));
}

export async function render(ctx) {
  if (!ctx.campaign) return h('p', {}, 'No campaign yet.');
  const status = h('div', { id: 'upload-result', role: 'status' });
  const file = h('input', { id: 'task-file', type: 'file', accept: '.jsonl,.json,.ndjson,application/x-ndjson,application/json', required: true });
  const form = h('form', { id: 'upload-form', class: 'form-grid' },
    h('div', { class: 'field wide' }, h('label', { for: 'task-file' }, `Task file (JSONL) for ${ctx.campaign}`), file,
      h('small', { class: 'muted' }, 'One comparison per line: pairs.jsonl, TRL standard or conversational, or generic {"prompt", "responses"}; '
        + 'an optional "gold" field marks a gold task. A malformed line rejects the whole file.')),
    h('div', { class: 'form-actions' }, h('button', { type: 'submit' }, 'Upload')));
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    ctx.showError(null);
    const f = file.files[0];
    if (!f) return;
    try {
      const text = await f.text();
      const r = await api.post(`/v1/tasks${api.query({ campaign: ctx.campaign })}`, text, 'application/x-ndjson');
      status.textContent = `Loaded ${r.loaded} tasks (ids ${r.task_ids ? r.task_ids.join('–') : '—'}), `
        + `${r.skipped_duplicates} duplicates skipped.`;
      ctx.notice(status.textContent);
      offset = 0;
      ctx.refresh();
    } catch (e) { ctx.showError(e); }
  });

  const parts = [card('Upload tasks', form, status)];
  const list = await api.optional(`/v1/tasks${api.query({ campaign: ctx.campaign, offset, limit: PAGE })}`);
  if (!list) {
    parts.push(h('p', { class: 'muted' }, 'The task list needs GET /v1/tasks, which this server does not offer.'));
    return h('div', {}, parts);
  }
  const show = async (id) => {
    shown = id;
    try {
      const d = await detail(ctx, id);
      holder.replaceChildren(d);
      d.scrollIntoView({ block: 'nearest' });
    } catch (e) { ctx.showError(e); }
  };
  const holder = h('div', { id: 'task-holder' });
  const pager = h('div', { class: 'pager' },
    h('button', { type: 'button', class: 'secondary', disabled: offset === 0, onclick: () => { offset = Math.max(0, offset - PAGE); ctx.refresh(); } }, 'Previous'),
    h('span', {}, list.total ? `${offset + 1}–${Math.min(offset + PAGE, list.total)} of ${num(list.total)}` : 'no tasks'),
    h('button', { type: 'button', class: 'secondary', disabled: offset + PAGE >= list.total, onclick: () => { offset += PAGE; ctx.refresh(); } }, 'Next'));
  parts.push(card(`Tasks in ${ctx.campaign}`, table([
    { title: 'Task', num: true, value: (t) => h('a', { href: '#tasks', class: 'task-link', onclick: (ev) => { ev.preventDefault(); show(t.id); } }, String(t.id)) },
    { title: 'Prompt', value: (t) => h('span', { class: 'clip' }, t.prompt + (t.prompt_truncated ? '…' : '')) },
    { title: 'Labels', num: true, value: (t) => `${num(t.labels)} / ${num(t.labels_needed)}` },
    { title: 'Complete', value: (t) => t.complete ? 'yes' : 'no' },
    { title: 'Gold', value: (t) => t.gold ?? '' },
  ], list.tasks, { id: 'task-table' }), pager), holder);
  if (shown !== null && list.tasks.some((t) => t.id === shown)) show(shown);
  return h('div', {}, parts);
}
