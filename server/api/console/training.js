// training.js — start a retrain (the fields of POST /v1/retrain), follow
// it live, cancel it; the periodic schedule; the server-side corruption
// settings of the selected campaign (an experiment).
import * as api from './api.js';
import { h, table, card, facts, num, time } from './dom.js';
import { curveChart } from './models.js';

const LOSSES = ['square-chipo', 'chipo', 'dpo', 'rdpo', 'rr-mle', 'rr-sgd', 'ipo'];
const FINISHED = ['succeeded', 'failed', 'cancelled'];
const STRATEGIES = ['flip', 'constant0', 'constant1', 'random', 'anti', 'backdoor'];
const POLL_MS = 400;

function field(label, input, hint) {
  return h('div', { class: 'field' }, h('label', { for: input.id }, label), input, hint ? h('small', { class: 'muted' }, hint) : null);
}

function numberInput(id, attrs) {
  return h('input', Object.assign({ id, name: id, type: 'number', step: 'any', inputmode: 'decimal' }, attrs || {}));
}

function select(id, options, value) {
  const el = h('select', { id, name: id }, options.map(([v, t]) => h('option', { value: v }, t)));
  el.value = value;
  return el;
}

// The form's filled fields as a retrain request (empty fields are left to
// the server's defaults).
function retrainRequest(form) {
  const req = { loss: form.elements.loss.value };
  const campaign = form.elements['retrain-campaign'].value;
  if (campaign) req.campaign = campaign;
  for (const k of ['seed', 'max_iter', 'epochs', 'batch']) {
    if (form.elements[k].value !== '') req[k] = parseInt(form.elements[k].value, 10);
  }
  for (const k of ['l2', 'beta', 'norm_bound', 'lr']) {
    if (form.elements[k].value !== '') req[k] = parseFloat(form.elements[k].value);
  }
  if (form.elements.optimizer.value) req.optimizer = form.elements.optimizer.value;
  req.features = form.elements.features.value;
  if (form.elements.text_dim.value !== '') req.text = { dim: parseInt(form.elements.text_dim.value, 10) };
  req.activate = form.elements.activate.checked;
  return req;
}

function runFacts(run) {
  const p = run.progress || {};
  return facts([
    ['Run', num(run.run)],
    ['Status', h('span', { class: `status status-${run.status}` }, run.status)],
    ['Trigger', run.trigger],
    ['Loss', run.request ? run.request.loss : '—'],
    ['Labels', num(run.labels)],
    ['Cut-off', num(run.cutoff)],
    ['Iteration', num(p.iteration)],
    ['Objective', num(p.objective, 6)],
    ['Gradient norm', num(p.grad_norm, 6)],
    ['Model', run.model_version !== null && run.model_version !== undefined ? `version ${run.model_version}` : '—'],
    ['Started', time(run.started_at)],
    ['Finished', time(run.finished_at)],
    ['Error', run.error ? `${run.error.message} (${run.error.error})` : '—'],
  ], { id: 'run-facts', class: 'facts wide' });
}

export async function render(ctx) {
  const [runs, schedule] = await Promise.all([api.get('/v1/retrain?limit=10'), api.get('/v1/retrain/schedule')]);
  let corruption = null;
  if (ctx.campaign) corruption = await api.get(`/v1/corruption${api.query({ campaign: ctx.campaign })}`);

  // ---- the live run ----
  const live = h('div', { id: 'live-run', 'aria-live': 'polite' });
  let timer = null;
  let watching = null; // the run seen unfinished
  ctx.onLeave(() => clearTimeout(timer));
  const follow = async (id) => {
    clearTimeout(timer);
    try {
      const run = await api.get(`/v1/retrain${api.query({ run: id })}`);
      if (!ctx.current()) return;
      const cancel = FINISHED.includes(run.status) ? null : h('button', {
        type: 'button', class: 'danger', id: 'cancel-run',
        onclick: async (ev) => {
          ev.target.disabled = true;
          try { await api.post('/v1/retrain/cancel', { run: id }); } catch (e) { ctx.showError(e); }
        },
      }, `Cancel run ${id}`);
      live.replaceChildren(runFacts(run), cancel || '',
        run.curve !== undefined ? curveChart(run.curve, `Training curve of run ${id}`) : '');
      live.dataset.run = run.run;
      live.dataset.status = run.status;
      if (!FINISHED.includes(run.status)) {
        watching = id;
        timer = setTimeout(() => follow(id), POLL_MS);
      } else if (watching === id) { // it ended while on screen
        watching = null;
        ctx.notice(run.status === 'succeeded' ? `Run ${id} succeeded: model version ${run.model_version}.`
          : `Run ${id} ${run.status}${run.error ? ': ' + run.error.message : ''}.`);
      }
    } catch (e) { ctx.showError(e); }
  };
  const newest = runs.runs[0];
  if (newest) follow(newest.run);
  else live.append(h('p', { class: 'muted' }, 'No training run yet.'));

  // ---- start a run ----
  const campaignOptions = [['', 'all campaigns'], ...ctx.campaigns.map((c) => [c.name, c.name])];
  const form = h('form', { id: 'retrain-form', class: 'form-grid' },
    field('Loss', select('loss', LOSSES.map((l) => [l, l]), 'square-chipo')),
    field('Campaign', select('retrain-campaign', campaignOptions, '')),
    field('Seed', numberInput('seed', { step: 1, min: 0, placeholder: '0' })),
    field('L2', numberInput('l2', { min: 0, placeholder: '0' })),
    field('β', numberInput('beta', { min: 0, placeholder: '1' })),
    field('Norm bound', numberInput('norm_bound', { min: 0, placeholder: 'none' })),
    field('Optimizer', select('optimizer', [['', 'default'], ['lbfgs', 'lbfgs'], ['sgd', 'sgd'], ['adam', 'adam']], '')),
    field('Max iterations', numberInput('max_iter', { step: 1, min: 1, placeholder: '500' })),
    field('Epochs', numberInput('epochs', { step: 1, min: 1, placeholder: '1' }), 'SGD and Adam'),
    field('Learning rate', numberInput('lr', { min: 0, placeholder: 'default' })),
    field('Batch', numberInput('batch', { step: 1, min: 1, placeholder: '1' })),
    field('Features', select('features', [['auto', 'auto'], ['dense', 'dense'], ['text', 'text']], 'auto')),
    field('Text buckets', numberInput('text_dim', { step: 1, min: 1, placeholder: '4096' }), 'hashed text features'),
    h('div', { class: 'field checkbox' }, h('input', { id: 'activate', name: 'activate', type: 'checkbox', checked: true }),
      h('label', { for: 'activate' }, 'Serve the model when the run succeeds')),
    h('div', { class: 'form-actions' }, h('button', { type: 'submit', id: 'start-run' }, 'Start training')));
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    ctx.showError(null);
    try {
      const run = await api.post('/v1/retrain', retrainRequest(form));
      ctx.notice(`Run ${run.run} started.`);
      watching = run.run;
      await follow(run.run);
    } catch (e) { ctx.showError(e); }
  });

  // ---- recent runs ----
  const recent = table([
    { title: 'Run', num: true, value: (r) => h('a', { href: '#training', onclick: (ev) => { ev.preventDefault(); follow(r.run); } }, String(r.run)) },
    { title: 'Status', value: (r) => r.status },
    { title: 'Trigger', value: (r) => r.trigger },
    { title: 'Loss', value: (r) => r.request ? r.request.loss : '—' },
    { title: 'Labels', num: true, value: (r) => num(r.labels) },
    { title: 'Model', num: true, value: (r) => num(r.model_version) },
    { title: 'Created', value: (r) => time(r.created_at) },
  ], runs.runs, { id: 'run-table' });

  // ---- schedule ----
  const sched = h('form', { id: 'schedule-form', class: 'form-grid' },
    field('Every (seconds)', numberInput('interval_s', { step: 1, min: 0, value: schedule.interval_s }), '0: off'),
    field('Every (new labels)', numberInput('every_labels', { step: 1, min: 0, value: schedule.every_labels }), '0: off'),
    h('div', { class: 'field wide' }, h('label', { for: 'schedule-request' }, 'Request of scheduled runs (JSON)'),
      h('textarea', { id: 'schedule-request', rows: 4, spellcheck: 'false' }, JSON.stringify(schedule.request || {}))),
    h('div', { class: 'form-actions' }, h('button', { type: 'submit' }, 'Save schedule')));
  sched.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    ctx.showError(null);
    let request;
    try { request = JSON.parse(sched.querySelector('#schedule-request').value || '{}'); } catch (e) {
      ctx.showError({ name: 'bad_json', message: 'the request is not valid JSON: ' + e.message });
      return;
    }
    try {
      await api.put('/v1/retrain/schedule', {
        interval_s: parseInt(sched.elements.interval_s.value || '0', 10),
        every_labels: parseInt(sched.elements.every_labels.value || '0', 10), request,
      });
      ctx.notice('Schedule saved.');
      ctx.refresh();
    } catch (e) { ctx.showError(e); }
  });

  const parts = [
    card('Current run', live),
    card('Start a training run', form),
    card('Recent runs', recent),
    card('Periodic retraining', sched),
  ];

  // ---- corruption (experiment) ----
  if (corruption) {
    const cf = h('form', { id: 'corruption-form', class: 'form-grid' },
      field('α (fraction of labels corrupted)', numberInput('alpha', { min: 0, max: 0.5, step: 'any', value: corruption.alpha }), '0 turns it off; at most 0.5'),
      field('Strategy', select('strategy', STRATEGIES.map((s) => [s, s]), corruption.strategy || 'flip')),
      field('Seed', numberInput('corruption_seed', { step: 1, min: 0, value: corruption.seed ?? 0 })),
      field('Feature (backdoor)', numberInput('feature', { step: 1, min: 0, value: corruption.feature ?? '' })),
      h('div', { class: 'form-actions' }, h('button', { type: 'submit', class: 'danger' }, `Save corruption of ${ctx.campaign}`)));
    cf.addEventListener('submit', async (ev) => {
      ev.preventDefault();
      ctx.showError(null);
      const body = {
        campaign: ctx.campaign, alpha: parseFloat(cf.elements.alpha.value || '0'),
        strategy: cf.elements.strategy.value, seed: parseInt(cf.elements.corruption_seed.value || '0', 10),
      };
      if (body.strategy === 'backdoor') body.feature = parseInt(cf.elements.feature.value || '0', 10);
      try {
        const saved = await api.put('/v1/corruption', body);
        ctx.notice(`Corruption settings ${saved.id} of ${ctx.campaign} saved: α ${num(saved.alpha)}, ${saved.strategy}.`);
        ctx.refresh(); // "in force" and the form show the stored settings
      } catch (e) { ctx.showError(e); }
    });
    parts.push(h('section', { class: 'card experiment', id: 'corruption' },
      h('h2', {}, `Experiment: label corruption in ${ctx.campaign}`),
      h('p', { class: 'warning' }, 'For robustness experiments only. With α > 0 the next training snapshots of this '
        + 'campaign replace that fraction of labels by the strategy\'s label (received labels are never changed). '
        + 'Models trained meanwhile record the settings.'),
      facts([['In force', corruption.id === null ? 'none (α 0)' : `settings ${corruption.id}, α ${num(corruption.alpha)}, ${corruption.strategy}`]]),
      cf));
  }
  return h('div', {}, parts);
}
