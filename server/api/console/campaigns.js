// campaigns.js — every campaign's progress, and the selected campaign's
// labels per hour, ε spent per annotator and budget exhaustion.
import * as api from './api.js';
import { h, table, card, facts, num, bar } from './dom.js';
import { histogram } from './plot.js';

// A view endpoint this server may not have yet answers 404 not_found.

export async function render(ctx) {
  const stats = await api.get('/v1/stats');
  const byName = new Map(stats.campaigns.map((c) => [c.name, c]));
  const rows = ctx.campaigns.map((c) => Object.assign({}, c, byName.get(c.name) || {}));
  const overview = card('Campaigns',
    table([
      { title: 'Campaign', value: (c) => c.name },
      { title: 'Tasks complete', num: true, value: (c) => `${num(c.tasks_complete ?? 0)} / ${num(c.tasks ?? 0)}` },
      { title: 'Labels', num: true, value: (c) => `${num(c.labels ?? 0)} / ${num(c.labels_needed ?? 0)}` },
      { title: 'Annotators', num: true, value: (c) => num(c.annotators ?? 0) },
      { title: 'ε spent', num: true, value: (c) => num(c.epsilon_spent ?? 0) },
      { title: 'ε range', value: (c) => `${num(c.epsilon_min)} – ${c.allow_infinite ? '∞' : num(c.epsilon_max)}` },
      { title: 'Budget per annotator', num: true, value: (c) => num(c.epsilon_budget) },
      { title: 'Labels per task', num: true, value: (c) => num(c.labels_per_task) },
      { title: 'Quota', num: true, value: (c) => num(c.annotator_quota) },
      { title: 'Trust', value: (c) => c.trust === 'central' ? h('strong', { class: 'privacy-raw' }, 'central') : 'local' },
      { title: 'Release ε spent', num: true, value: (c) => c.trust === 'central' ? `${num(c.release_epsilon_spent ?? 0)} / ${num(c.release_epsilon)}` : '—' },
    ], rows, { id: 'campaign-table' }));
  if (!ctx.campaign) return h('div', {}, overview);

  const c = rows.find((r) => r.name === ctx.campaign) || {};
  const view = await api.optional(`/v1/campaigns/view${api.query({ campaign: ctx.campaign, bucket_s: 3600 })}`);
  const p = view ? view.progress : {
    tasks: c.tasks ?? 0, tasks_complete: c.tasks_complete ?? 0, labels: c.labels ?? 0,
    labels_needed: c.labels_needed ?? 0, complete: false,
  };
  const progress = card(`Progress of ${ctx.campaign}`,
    h('div', { id: 'progress' },
      bar(p.tasks_complete, p.tasks, 'Tasks complete'),
      bar(p.labels, p.labels_needed, 'Labels'),
      h('p', { class: 'muted' }, p.complete ? 'The campaign is complete: every task has the labels it needs.'
        : `${num(Math.max(0, p.labels_needed - p.labels))} labels still needed.`)));
  if (!view) {
    return h('div', {}, overview, progress,
      h('p', { class: 'muted' }, 'Labels over time and ε per annotator need GET /v1/campaigns/view, which this server does not offer.'));
  }
  const releases = c.trust === 'central' ? card('Model releases (central campaign)',
    facts([
      ['Trust', 'central: annotators send their true answers; only released models leave the server, and its labels are never exported'],
      ['Release budget ε (pure DP)', `${num(c.release_epsilon_spent ?? 0)} spent of ${num(c.release_epsilon)}`],
      ['Release budget δ', `${num(c.release_delta_spent ?? 0)} spent of ${num(c.release_delta ?? 0)}`],
      ['Contribution cap per annotator', c.contribution_cap ? num(c.contribution_cap) : 'none'],
    ], { id: 'releases' })) : '';
  const lot = view.labels_over_time;
  const perHour = 3600 / lot.bucket_s;
  const rate = card('Labels per hour',
    histogram(lot.points.map((q) => ({ low: q.t_ms, high: q.t_ms + lot.bucket_s * 1000, count: q.labels * perHour })),
      { title: `Labels per hour in ${ctx.campaign}`, xLabel: 'time (UTC)', yLabel: 'labels per hour', xTime: true }),
    lot.earlier_labels ? h('p', { class: 'muted' }, `${num(lot.earlier_labels)} earlier labels are not shown.`) : '');
  const eps = view.epsilon;
  const budget = card('Privacy budget',
    facts([
      ['Budget per annotator', num(eps.budget)],
      ['Annotators', num(eps.annotators)],
      ['Budget exhausted', `${num(eps.exhausted)} of ${num(eps.annotators)}`],
      ['ε spent in all', num(eps.spent_total)],
    ], { id: 'budget' }),
    histogram(eps.histogram.map((b) => ({ low: b.low, high: b.high, count: b.annotators })),
      { title: `ε spent per annotator in ${ctx.campaign}`, xLabel: 'ε spent', yLabel: 'annotators', integers: true }));
  return h('div', {}, overview, progress, releases, h('div', { class: 'grid2' }, rate, budget));
}
