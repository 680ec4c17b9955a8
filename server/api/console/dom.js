// dom.js — building the page from data: elements with text content only
// (never HTML from data), tables, number formats.

// h('td', {class: 'num'}, 'text', childNode, ...): strings become text nodes.
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'class') el.className = v;
    else if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else if (k in el && typeof v !== 'string') el[k] = v;
    else el.setAttribute(k, v === true ? '' : v);
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

// A table: columns [{title, value: row => text|Node, num: bool}], rows.
export function table(columns, rows, attrs) {
  return h('div', { class: 'table-wrap' },
    h('table', attrs || {},
      h('thead', {}, h('tr', {}, columns.map((c) => h('th', { scope: 'col', class: c.num ? 'num' : null }, c.title)))),
      h('tbody', {}, rows.length === 0
        ? h('tr', {}, h('td', { colspan: columns.length, class: 'empty' }, 'Nothing yet.'))
        : rows.map((r) => h('tr', {}, columns.map((c) => h('td', { class: c.num ? 'num' : null }, c.value(r))))))));
}

// A labelled figure: <dl> of [term, value] pairs.
export function facts(pairs, attrs) {
  return h('dl', Object.assign({ class: 'facts' }, attrs || {}),
    pairs.map(([term, value]) => [h('dt', {}, term), h('dd', {}, value)]));
}

export function card(title, ...children) {
  return h('section', { class: 'card' }, h('h2', {}, title), ...children);
}

// Numbers with sensible precision; null and undefined show as an em dash.
export function num(x, digits = 3) {
  if (x === null || x === undefined) return '—';
  if (typeof x !== 'number') return String(x);
  if (!Number.isFinite(x)) return x > 0 ? '∞' : '−∞';
  if (Number.isInteger(x)) return x.toLocaleString('en-US');
  const a = Math.abs(x);
  if (a !== 0 && (a < 1e-3 || a >= 1e6)) return x.toExponential(2);
  return x.toLocaleString('en-US', { maximumFractionDigits: digits });
}

export function pct(x) {
  return x === null || x === undefined ? '—' : (100 * x).toFixed(1) + ' %';
}

export function time(ms) {
  if (ms === null || ms === undefined) return '—';
  return new Date(ms).toISOString().replace('T', ' ').replace(/\.\d+Z$/, ' UTC');
}

// An estimate with its interval: "0.82 [0.71, 0.93]" (debiased estimates
// may fall outside [0, 1]).
export function interval(e) {
  if (!e || typeof e.estimate !== 'number') return '—';
  const f = (x) => (typeof x === 'number' ? x.toFixed(2) : '—');
  return `${f(e.estimate)} [${f(e.low)}, ${f(e.high)}]`;
}

// A progress bar with its figures as text.
export function bar(done, total, label) {
  const frac = total > 0 ? Math.min(1, done / total) : 0;
  return h('div', { class: 'bar-row' },
    h('span', { class: 'bar-label' }, label),
    h('progress', { max: total > 0 ? total : 1, value: total > 0 ? Math.min(done, total) : 0, 'aria-label': label }),
    h('span', { class: 'bar-figure' }, `${num(done)} / ${num(total)} (${pct(frac)})`));
}
