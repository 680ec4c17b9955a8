// plot.js — small hand-drawn SVG charts: a line chart (one or two series,
// each on its own axis scale) and a histogram. Text goes in with
// textContent; the charts scale with their container (viewBox).

const NS = 'http://www.w3.org/2000/svg';
const W = 640, H = 240, M = { left: 56, right: 56, top: 24, bottom: 36 };

function s(tag, attrs, text) {
  const el = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs || {})) el.setAttribute(k, v);
  if (text !== undefined) el.textContent = text;
  return el;
}

// About five round tick values covering [lo, hi].
function ticks(lo, hi) {
  if (!(hi > lo)) return [lo];
  const raw = (hi - lo) / 5, mag = Math.pow(10, Math.floor(Math.log10(raw)));
  const step = [1, 2, 5, 10].map((m) => m * mag).find((v) => v >= raw);
  const out = [];
  for (let v = Math.ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) out.push(+v.toPrecision(12));
  return out;
}

// Round times (Unix ms) covering [lo, hi]: minutes, hours or days.
const MIN = 60e3, HOUR = 3600e3, DAY = 86400e3;
function timeTicks(lo, hi) {
  const steps = [MIN, 5 * MIN, 10 * MIN, 15 * MIN, 30 * MIN, HOUR, 2 * HOUR, 3 * HOUR, 6 * HOUR, 12 * HOUR, DAY, 2 * DAY, 7 * DAY, 30 * DAY];
  const step = steps.find((st) => (hi - lo) / st <= 6) || 365 * DAY;
  const out = [];
  for (let v = Math.ceil(lo / step) * step; v <= hi; v += step) out.push(v);
  return out;
}

function label(v) {
  const a = Math.abs(v);
  if (a !== 0 && (a < 1e-3 || a >= 1e5)) return v.toExponential(1);
  return String(+v.toPrecision(4));
}

function timeLabel(ms, span) {
  const d = new Date(ms).toISOString();
  return span > 2 * 86400e3 ? d.slice(5, 10) : d.slice(11, 16);
}

function svgRoot(title) {
  const svg = s('svg', { viewBox: `0 0 ${W} ${H}`, role: 'img', class: 'plot', 'aria-label': title });
  svg.append(s('title', {}, title));
  return svg;
}

function noData(title) {
  const p = document.createElement('p');
  p.className = 'muted';
  p.textContent = `${title}: no data yet.`;
  return p;
}

function extent(values, zero) {
  let lo = Math.min(...values), hi = Math.max(...values);
  if (zero) lo = Math.min(0, lo);
  if (lo === hi) { lo -= 0.5; hi += 0.5; } // one value: a unit around it
  return [lo, hi];
}

// series: [{name, points: [[x, y], ...], axis: 'left'|'right', log: bool}];
// opts: {title, xLabel, xTime: bool, xIntegers: bool, zero: bool}. Returns an <svg> or, with
// no points, a paragraph saying so.
export function lineChart(series, opts) {
  const all = series.flatMap((sr) => sr.points);
  if (all.length === 0) return noData(opts.title);
  const svg = svgRoot(opts.title);
  const [x0, x1] = extent(all.map((p) => p[0]), false);
  const sx = (x) => M.left + ((x - x0) / (x1 - x0)) * (W - M.left - M.right);
  const plotBottom = H - M.bottom;
  svg.append(s('line', { x1: M.left, y1: plotBottom, x2: W - M.right, y2: plotBottom, class: 'axis' }));
  const xt = opts.xTime ? timeTicks(x0, x1) : ticks(x0, x1).filter((v) => !opts.xIntegers || Number.isInteger(v));
  for (const t of xt) {
    svg.append(s('line', { x1: sx(t), y1: plotBottom, x2: sx(t), y2: plotBottom + 4, class: 'axis' }));
    svg.append(s('text', { x: sx(t), y: plotBottom + 16, 'text-anchor': 'middle', class: 'tick' },
      opts.xTime ? timeLabel(t, x1 - x0) : label(t)));
  }
  svg.append(s('text', { x: (M.left + W - M.right) / 2, y: H - 4, 'text-anchor': 'middle', class: 'axis-title' }, opts.xLabel));
  series.forEach((sr, i) => {
    if (sr.points.length === 0) return;
    const tf = sr.log ? (y) => Math.log10(Math.max(y, 1e-300)) : (y) => y;
    const [y0, y1] = extent(sr.points.map((p) => tf(p[1])), opts.zero && !sr.log);
    const sy = (y) => plotBottom - ((tf(y) - y0) / (y1 - y0)) * (plotBottom - M.top);
    const right = sr.axis === 'right';
    const ax = right ? W - M.right : M.left;
    svg.append(s('line', { x1: ax, y1: M.top, x2: ax, y2: plotBottom, class: `axis series-${i}` }));
    let yt = ticks(y0, y1);
    if (sr.log && yt.filter(Number.isInteger).length >= 2) yt = yt.filter(Number.isInteger); // powers of ten
    for (const t of yt) {
      const y = plotBottom - ((t - y0) / (y1 - y0)) * (plotBottom - M.top);
      svg.append(s('text', { x: right ? ax + 6 : ax - 6, y: y + 4, 'text-anchor': right ? 'start' : 'end', class: `tick series-${i}` },
        label(sr.log ? Math.pow(10, t) : t)));
      if (i === 0) svg.append(s('line', { x1: M.left, y1: y, x2: W - M.right, y2: y, class: 'grid' }));
    }
    const d = sr.points.map((p, j) => `${j ? 'L' : 'M'}${sx(p[0]).toFixed(1)},${sy(p[1]).toFixed(1)}`).join('');
    svg.append(s('path', { d, class: `line series-${i}` }));
    if (sr.points.length <= 60) {
      for (const p of sr.points) svg.append(s('circle', { cx: sx(p[0]), cy: sy(p[1]), r: 2.5, class: `dot series-${i}` }));
    }
    // legends above the plot: the left series at the left, the right one at the right
    svg.append(s('text', { x: right ? W - M.right : M.left, y: M.top - 10, 'text-anchor': right ? 'end' : 'start', class: `legend series-${i}` },
      sr.name + (sr.log ? ' (log scale)' : '')));
  });
  return svg;
}

// bins: [{low, high, count}] (count may be fractional); opts: {title,
// xLabel, yLabel, xTime: bool (low and high are Unix milliseconds)}.
export function histogram(bins, opts) {
  if (bins.length === 0) return noData(opts.title);
  const svg = svgRoot(opts.title);
  const x0 = Math.min(...bins.map((b) => b.low)), x1 = Math.max(...bins.map((b) => b.high));
  const top = Math.max(1, ...bins.map((b) => b.count));
  const sx = (x) => M.left + ((x - x0) / ((x1 - x0) || 1)) * (W - M.left - M.right);
  const plotBottom = H - M.bottom;
  const sy = (y) => plotBottom - (y / top) * (plotBottom - M.top);
  for (const t of ticks(0, top).filter((v) => !opts.integers || Number.isInteger(v))) {
    svg.append(s('line', { x1: M.left, y1: sy(t), x2: W - M.right, y2: sy(t), class: 'grid' }));
    svg.append(s('text', { x: M.left - 6, y: sy(t) + 4, 'text-anchor': 'end', class: 'tick' }, label(t)));
  }
  for (const b of bins) {
    const x = sx(b.low), w = Math.max(1, sx(b.high) - sx(b.low) - 2);
    const r = s('rect', { x: x + 1, y: sy(b.count), width: w, height: plotBottom - sy(b.count), class: 'bar' });
    const range = opts.xTime ? `${new Date(b.low).toISOString().slice(0, 16).replace('T', ' ')} UTC`
      : `${label(b.low)}–${label(b.high)}`;
    r.append(s('title', {}, `${range}: ${label(b.count)}`));
    svg.append(r);
  }
  svg.append(s('line', { x1: M.left, y1: plotBottom, x2: W - M.right, y2: plotBottom, class: 'axis' }));
  for (const t of opts.xTime ? timeTicks(x0, x1) : ticks(x0, x1)) {
    svg.append(s('text', { x: sx(t), y: plotBottom + 16, 'text-anchor': 'middle', class: 'tick' },
      opts.xTime ? timeLabel(t, x1 - x0) : label(t)));
  }
  svg.append(s('text', { x: (M.left + W - M.right) / 2, y: H - 4, 'text-anchor': 'middle', class: 'axis-title' }, opts.xLabel));
  const my = (M.top + plotBottom) / 2;
  svg.append(s('text', { x: 14, y: my, transform: `rotate(-90 14 ${my})`, 'text-anchor': 'middle', class: 'axis-title' }, opts.yLabel));
  return svg;
}
