// models.js — stored models: loss, settings, data cut-off, corruption, the
// privacy of the labels they were trained on and TRL metrics; one model's training curve; activation (roll back or
// forward) after a confirmation.
import * as api from './api.js';
import { h, table, card, facts, num, time } from './dom.js';
import { lineChart } from './plot.js';

let selected = null; // the version shown in detail

function corruptionText(list) {
  if (!list || list.length === 0) return 'none';
  return list.map((c) => `${c.campaign || ''} α=${num(c.alpha)} ${c.strategy || ''}`.trim()).join('; ');
}

// The privacy of a model's training labels, short (the table) and in full
// (the detail). null: recorded before the server kept it, so never served
// without a token.
function privacyShort(p) {
  if (!p) return 'unknown';
  if (p.mechanism) return `released: ${p.mechanism} ε ${num(p.release_epsilon)}${p.release_delta ? `, δ ${num(p.release_delta)}` : ''}`;
  if (!p.privatized) return `${num(p.unprivatized_labels)} unprivatized`;
  return `ε ≤ ${num(p.epsilon_max)} per label`;
}

function epsilonText(x) {
  return x === null || x === undefined ? '∞' : num(x);
}

function privacyFacts(p) {
  if (!p) {
    return [['Privacy', 'unknown (trained before the server recorded it): treated as not privatized, never served without a token']];
  }
  const release = p.mechanism
    ? [['Privacy', `released by the ${p.mechanism} mechanism from a central campaign's true labels: `
        + `(ε ${num(p.release_epsilon)}, δ ${num(p.release_delta || 0)})-DP, public (post-processing of the release)`]]
    : [['Privacy', p.privatized
      ? 'every label privatized: the model is post-processing of ε-LDP reports'
      : `${num(p.unprivatized_labels)} of ${num(p.labels)} labels not privatized (ε = ∞): served only with a token`]];
  return [
    ...release,
    ['Label ε (privatized)', p.epsilon_min === null ? 'none privatized' : `${num(p.epsilon_min)} – ${num(p.epsilon_max)}`],
    ['User-level ε (most per annotator)', epsilonText(p.user_level_epsilon ?? p.epsilon_per_annotator)],
    ['Annotators', num(p.annotators)],
  ];
}

// The release record of the model file: mechanism and its candidate set or
// noise calibration, as "key value" text.
function releaseText(r) {
  if (!r) return null;
  return Object.entries(r).map(([k, v]) => `${k} ${typeof v === 'object' && v !== null
    ? Object.entries(v).filter(([, x]) => typeof x !== 'object').map(([a, x]) => `${a} ${num(x)}`).join(', ')
    : num(v)}`).join('; ');
}

function metric(m, key) {
  return m && m[key] !== undefined ? num(m[key]) : '—';
}

// The confirmation shown in place of the button: activating changes what
// /v1/score serves at once.
function activateControl(ctx, m, active) {
  const box = h('span', { class: 'activate' });
  const ask = h('button', {
    type: 'button', class: 'secondary', 'data-version': m.version,
    onclick: () => {
      const verb = active !== null && m.version < active ? 'Roll back to' : 'Activate';
      const yes = h('button', {
        type: 'button', class: 'danger confirm-activate',
        onclick: async () => {
          yes.disabled = true;
          try {
            await api.post('/v1/models/activate', { version: m.version });
            ctx.notice(`Version ${m.version} is now served.`);
            selected = m.version;
            ctx.refresh();
          } catch (e) { ctx.showError(e); yes.disabled = false; }
        },
      }, `${verb} version ${m.version}`);
      const cancel = () => { box.replaceChildren(ask); ask.focus(); };
      const no = h('button', { type: 'button', class: 'secondary', onclick: cancel }, 'Cancel');
      box.replaceChildren(h('span', { class: 'confirm-text' }, `Serve version ${m.version}${active !== null ? ` instead of ${active}` : ''}?`), yes, no);
      box.onkeydown = (ev) => { if (ev.key === 'Escape') cancel(); };
      yes.focus();
    },
  }, active !== null && m.version < active ? 'Roll back…' : 'Activate…');
  box.append(ask);
  return box;
}

export async function render(ctx) {
  const list = await api.get('/v1/models');
  const active = list.active_version ?? null;
  if (selected === null || !list.models.some((m) => m.version === selected)) {
    selected = active ?? (list.models.length ? list.models[0].version : null);
  }
  const rows = list.models;
  const overview = card('Models',
    h('p', { class: 'muted' }, active !== null ? `Version ${active} is served by /v1/score.` : 'No model is served yet.'),
    table([
      { title: 'Version', num: true, value: (m) => h('a', { href: '#models', class: 'model-link', onclick: (ev) => { ev.preventDefault(); selected = m.version; ctx.refresh(); } }, String(m.version)) },
      { title: 'Created', value: (m) => time(m.created_at) },
      { title: 'Loss', value: (m) => m.loss },
      { title: 'Campaign', value: (m) => m.campaign ?? 'all' },
      { title: 'Cut-off', num: true, value: (m) => num(m.cutoff) },
      { title: 'Labels', num: true, value: (m) => num(m.labels) },
      { title: 'Objective', num: true, value: (m) => metric(m.metrics, 'objective') },
      { title: 'Accuracy', num: true, value: (m) => metric(m.metrics, 'rewards/accuracies') },
      { title: 'Margin', num: true, value: (m) => metric(m.metrics, 'rewards/margins') },
      { title: 'Corruption', value: (m) => corruptionText(m.corruption) },
      { title: 'Privacy', value: (m) => h('span', { class: m.privacy && m.privacy.public ? 'privacy-ok' : 'privacy-raw' }, privacyShort(m.privacy)) },
      { title: 'Served', value: (m) => m.active ? h('strong', { class: 'active-badge' }, 'served') : activateControl(ctx, m, active) },
    ], rows, { id: 'model-table' }));
  if (selected === null) return h('div', {}, overview);

  const m = await api.get(`/v1/models${api.query({ version: selected })}`);
  const detail = card(`Model version ${m.version}`,
    h('div', { class: 'grid2' },
      facts([
        ['Loss', `${m.loss} (link ${m.link}, β ${num(m.beta)})`],
        ['Training run', num(m.run)],
        ['Campaign', m.campaign ?? 'all'],
        ['Data cut-off (label id)', num(m.cutoff)],
        ['Labels', num(m.labels)],
        ['Features', settingsText(m.features)],
        ['Corruption', corruptionText(m.corruption)],
        ...privacyFacts(m.privacy),
        ...(m.release ? [['Release record', releaseText(m.release)]] : []),
        ['Training time', m.duration_ms !== undefined ? `${num(m.duration_ms / 1000, 2)} s` : '—'],
      ], { id: 'model-detail' }),
      curveChart(m.curve, `Training curve of version ${m.version}`)),
    h('details', { open: true }, h('summary', {}, 'Metrics'),
      facts(Object.entries(m.metrics || {}).map(([k, v]) => [k, num(v, 4)]), { id: 'model-metrics', class: 'facts wide' })),
    h('details', {}, h('summary', {}, 'Settings'),
      facts(Object.entries(m.hyper || {}).map(([k, v]) => [k, settingsText(v)]), { class: 'facts wide' })));
  return h('div', {}, overview, detail);
}

// A setting as text: numbers formatted, objects as "key value, ...".
function settingsText(v) {
  if (v === null || v === undefined) return '—';
  if (typeof v !== 'object') return num(v);
  return Object.entries(v).map(([k, x]) => `${k} ${settingsText(x)}`).join(', ');
}

// Objective (left axis) and gradient norm (right axis, log scale) per
// iteration, as recorded during the run.
export function curveChart(curve, title) {
  if (!curve) return h('p', { class: 'muted' }, 'This server does not record training curves.');
  return lineChart([
    { name: 'objective', points: curve.filter((p) => p.objective !== null).map((p) => [p.iteration, p.objective]) },
    { name: 'gradient norm', axis: 'right', log: true, points: curve.filter((p) => p.grad_norm > 0).map((p) => [p.iteration, p.grad_norm]) },
  ], { title, xLabel: 'iteration', xIntegers: true });
}
