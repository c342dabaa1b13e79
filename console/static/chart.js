// Charts drawn by the console itself, in SVG: a line chart over time with
// real ticks on both axes, and the list's sparklines. The model (where
// every line, tick and label goes) is pure and unit tested
// (console/testdata/chart.test.js); draw only turns it into elements.

import { niceTicks, thousands, perSecond, timeTicks, tickLabel } from './format.js';

const SVG = 'http://www.w3.org/2000/svg';

/**
 * chartModel lays out series of [ms, value|null] points between t0 and t1
 * in a width × height box: value ticks from zero to a round maximum, time
 * ticks on whole steps of the clock, and one path per series (broken where
 * a value is null). The value axis reaches at least yMax (a sale's stock,
 * so that units left read as a share of it).
 */
export function chartModel({ series, t0, t1, width = 640, height = 200, rate = false, yMax = 0 }) {
  const left = 52, right = 8, top = 8, bottom = 22;
  const w = width - left - right, h = height - top - bottom;
  let hi = yMax;
  for (const s of series) for (const [, v] of s.points) if (v !== null && v > hi) hi = v;
  const { ticks, max } = niceTicks(0, Math.max(hi, 1), 4);
  const span = Math.max(t1 - t0, 1000);
  const x = (t) => left + ((t - t0) / span) * w;
  const y = (v) => top + h - (v / max) * h;
  const fmt = rate ? perSecond : thousands;
  const model = {
    width, height, left, top, w, h,
    yTicks: ticks.map((v) => ({ y: y(v), label: fmt(v) })),
    xTicks: timeTicks(t0, t0 + span, Math.max(2, Math.floor(w / 90))).map((t) => ({ x: x(t), label: tickLabel(t) })),
    paths: [],
  };
  for (const s of series) {
    let d = '';
    let pen = false;
    for (const [t, v] of s.points) {
      if (t < t0 || v === null || v === undefined) {
        pen = false;
        continue;
      }
      d += `${pen ? 'L' : 'M'}${x(t).toFixed(1)} ${y(v).toFixed(1)} `;
      pen = true;
    }
    model.paths.push({ name: s.name, cls: s.cls, d: d.trim() });
  }
  return model;
}

function el(name, attrs = {}, text) {
  const e = document.createElementNS(SVG, name);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
  if (text !== undefined) e.textContent = text;
  return e;
}

/** draw renders a chart model into the svg element, replacing what it held. */
export function draw(svg, m) {
  svg.replaceChildren();
  svg.setAttribute('viewBox', `0 0 ${m.width} ${m.height}`);
  const grid = el('g', { class: 'grid' });
  for (const t of m.yTicks) {
    grid.append(el('line', { x1: m.left, x2: m.left + m.w, y1: t.y, y2: t.y }));
    grid.append(el('text', { x: m.left - 6, y: t.y + 4, 'text-anchor': 'end' }, t.label));
  }
  for (const t of m.xTicks) {
    grid.append(el('line', { x1: t.x, x2: t.x, y1: m.top + m.h, y2: m.top + m.h + 4 }));
    grid.append(el('text', { x: t.x, y: m.top + m.h + 16, 'text-anchor': 'middle' }, t.label));
  }
  grid.append(el('line', { class: 'axis', x1: m.left, x2: m.left + m.w, y1: m.top + m.h, y2: m.top + m.h }));
  svg.append(grid);
  for (const p of m.paths) {
    if (p.d) svg.append(el('path', { class: `line ${p.cls}`, d: p.d }));
  }
}

/** sparkPath is the path of a sparkline of values (null: a gap) in a w × h box, from zero to top. */
export function sparkPath(values, top, w = 120, h = 28) {
  const n = values.length;
  if (n === 0 || !(top > 0)) return '';
  let d = '';
  let pen = false;
  values.forEach((v, i) => {
    if (v === null || v === undefined) {
      pen = false;
      return;
    }
    const x = n === 1 ? w : (i / (n - 1)) * w;
    const y = 1 + (h - 2) * (1 - Math.min(v, top) / top);
    d += `${pen ? 'L' : 'M'}${x.toFixed(1)} ${y.toFixed(1)} `;
    pen = true;
  });
  return d.trim();
}

/** sparkline returns an SVG element drawing values against top, described for screen readers by label. */
export function sparkline(values, top, label) {
  const svg = el('svg', { class: 'spark', viewBox: '0 0 120 28', preserveAspectRatio: 'none', role: 'img', 'aria-label': label });
  const d = sparkPath(values, top);
  // The area under the line shows the level against the whole stock.
  const area = sparkArea(d);
  if (area) svg.append(el('path', { class: 'area', d: area }));
  svg.append(el('path', { class: 'line', d }));
  return svg;
}

/** sparkArea closes a sparkline's path (one unbroken stretch) down to the baseline, for its area; '' if it has gaps. */
export function sparkArea(d, h = 28) {
  if (!d || d.indexOf('M', 1) >= 0) return '';
  const pts = d.slice(1).split(/ ?L/);
  const first = pts[0].split(' ')[0];
  const last = pts[pts.length - 1].split(' ')[0];
  return `${d} L${last} ${h} L${first} ${h} Z`;
}
