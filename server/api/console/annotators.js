// annotators.js — the campaign's annotators: labels, ε spent, skips, and
// their quality under privacy (debiased gold accuracy and agreement with
// confidence intervals; outliers flagged).
import * as api from './api.js';
import { h, table, card, facts, num, interval, time } from './dom.js';


export async function render(ctx) {
  if (!ctx.campaign) return h('p', {}, 'No campaign yet.');
  const q = api.query({ campaign: ctx.campaign });
  // a central campaign's labels are true answers: the server serves no
  // statistic of them (quality answers central_labels_private)
  const central = (ctx.campaigns.find((c) => c.name === ctx.campaign) || {}).trust === 'central';
  const [list, quality] = await Promise.all([api.optional(`/v1/annotators${q}`),
    central ? null : api.optional(`/v1/quality${q}`)]);
  const parts = [];
  if (central) {
    parts.push(h('p', { class: 'muted', id: 'central-quality' }, `${ctx.campaign} is a central campaign: its labels are the annotators' `
      + 'true answers and are never exported or served, so no label quality is shown.'));
  }
  if (quality) {
    const conf = Math.round(100 * quality.confidence);
    parts.push(card(`Label quality in ${ctx.campaign}`,
      facts([
        ['Gold labels', num(quality.gold ? quality.gold.labels : 0)],
        [`Gold accuracy (debiased, ${conf} % CI)`, interval(quality.gold && quality.gold.accuracy)],
        ['Overlapping pairs', num(quality.agreement ? quality.agreement.pairs : 0)],
        [`Agreement (debiased, ${conf} % CI)`, interval(quality.agreement)],
        ['Pairs needed for the planned interval width', quality.planning
          ? `${num(quality.planning.pairs_needed)} (width ${num(quality.planning.width)} at ε ${num(quality.planning.epsilon)})` : '—'],
      ], { id: 'quality' }),
      h('p', { class: 'muted' }, 'Estimates are corrected for the randomized response each label went through, '
        + 'so with few labels they may fall outside [0, 1], while their intervals stay within it; intervals are wide '
        + 'at small ε. See docs/operators.md, "Label quality under privacy".')));
  }
  if (!quality && !central) {
    parts.push(h('p', { class: 'muted' }, 'Gold accuracy, agreement and outliers need GET /v1/quality, which this server does not offer.'));
  }
  const byName = new Map(((quality && quality.annotators) || []).map((a) => [a.pseudonym, a]));
  let rows;
  if (list) {
    rows = list.annotators.map((a) => Object.assign({ quality: byName.get(a.pseudonym) }, a));
  } else {
    rows = [...byName.values()].map((a) => ({ pseudonym: a.pseudonym, quality: a }));
    parts.push(h('p', { class: 'muted' }, 'Labels, ε and skips per annotator need GET /v1/annotators, which this server does not offer.'));
  }
  const flagged = (a) => a.quality && a.quality.flagged;
  parts.push(card(`Annotators in ${ctx.campaign}`,
    table([
      { title: 'Pseudonym', value: (a) => a.pseudonym },
      { title: 'Labels', num: true, value: (a) => num(a.labels) },
      { title: 'ε spent', num: true, value: (a) => a.epsilon_budget !== undefined ? `${num(a.epsilon_spent)} / ${num(a.epsilon_budget)}` : num(a.epsilon_spent) },
      { title: 'Skips', num: true, value: (a) => num(a.skips) },
      { title: 'Gold labels', num: true, value: (a) => num(a.quality ? a.quality.gold_labels : null) },
      { title: 'Gold accuracy [CI]', num: true, value: (a) => interval(a.quality && a.quality.gold_accuracy) },
      { title: 'Agreement [CI]', num: true, value: (a) => interval(a.quality && a.quality.agreement) },
      { title: 'Flag', value: (a) => flagged(a) ? h('span', { class: 'flag', title: a.quality.flag_reason || '' }, '⚑ ' + (a.quality.flag_reason || 'outlier')) : '' },
      { title: 'Last label', value: (a) => a.revoked ? 'revoked' : time(a.last_label_ms) },
    ], rows, { id: 'annotator-table' })));
  if (rows.some(flagged)) {
    parts.push(h('p', { class: 'muted' }, 'Flagged: the annotator\'s debiased quality is significantly below the campaign\'s, '
      + 'after accounting for the privacy noise.'));
  }
  return h('div', {}, parts);
}
