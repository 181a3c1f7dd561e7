/**
 * Charts drawn from record data as SVG and plain elements: speedups per candidate, fraction of
 * the roofline, the |candidate - reference| error map, kernel times and the kernel timeline.
 * Every chart scales to its container (viewBox), so the view fits any notebook width.
 */
import { el, muted, svg, table } from './dom';
import { Candidate, ErrorMap, Kernel, KernelEvent, fixed, intervalText, num, percent, rooflineText, speedupText, spreadText, validCi } from './record';

const EAGER = '#1565c0';
const COMPILE = '#ef6c00';

interface Point {
  id: string;
  eager: number | null;
  compile: number | null;
  /** 95 % intervals, drawn as error bars; null where the record has none. */
  eagerCi: [number, number] | null;
  compileCi: [number, number] | null;
  /** Timed on a busy CPU: its interval spans block medians and low calls (written out). */
  busy: boolean;
}

export function speedupPoints(history: Candidate[]): Point[] {
  return history
    .filter(a => a.result.state === 'correct' && a.result.timing?.real && a.result.timing?.speedup_vs_eager)
    .map(a => ({
      id: a.id,
      eager: a.result.timing?.speedup_vs_eager ?? null,
      compile: a.result.timing?.speedup_vs_compile ?? null,
      eagerCi: validCi(a.result.timing?.speedup_vs_eager_ci),
      compileCi: a.result.timing?.speedup_vs_compile ? validCi(a.result.timing?.speedup_vs_compile_ci) : null,
      busy: !!a.result.timing?.busy
    }));
}

/** Speedup vs eager (blue) and vs torch.compile (orange) per correct candidate, each with its
 * 95 % interval as an error bar where the record has one; 1x dashed. */
export function speedupChart(points: Point[]): Element {
  if (points.length === 0) {
    return muted('no timed candidate yet');
  }
  const width = 560;
  const height = 200;
  const left = 44;
  const bottom = 24;
  const values = points.flatMap(p => [p.eager || 0, p.compile || 0, p.eagerCi?.[1] || 0, p.compileCi?.[1] || 0]);
  const top = Math.max(1.2, ...values) * 1.1;
  const x = (i: number) => left + (i * (width - left - 16)) / Math.max(points.length - 1, 1);
  const y = (v: number) => height - bottom - (v / top) * (height - bottom - 10);
  const chart = svg('svg', {
    class: 'kforge-chart',
    viewBox: `0 0 ${width} ${height}`,
    role: 'img',
    'aria-label': 'speedup per correct candidate',
    'data-chart': 'speedup'
  });
  chart.appendChild(
    svg('line', { x1: left, x2: width - 8, y1: y(1), y2: y(1), stroke: '#999', 'stroke-dasharray': '4 3' })
  );
  chart.appendChild(svg('text', { x: 4, y: y(1) + 4, 'font-size': 11 }, '1x'));
  chart.appendChild(svg('text', { x: 4, y: y(top / 1.1) + 4, 'font-size': 11 }, `${num(top / 1.1, 2)}x`));
  for (const [key, colour] of [
    ['eager', EAGER],
    ['compile', COMPILE]
  ] as ['eager' | 'compile', string][]) {
    const series = points.map((p, i) => [i, p[key]] as [number, number | null]).filter(([, v]) => v);
    if (series.length === 0) {
      continue;
    }
    chart.appendChild(
      svg('polyline', {
        points: series.map(([i, v]) => `${x(i)},${y(v as number)}`).join(' '),
        fill: 'none',
        stroke: colour,
        'stroke-width': 2
      })
    );
    for (const [i, v] of series) {
      const ci = key === 'eager' ? points[i].eagerCi : points[i].compileCi;
      if (ci) {
        const [lo, hi] = [y(Math.max(ci[0], 0)), y(ci[1])];
        const cx = x(i);
        const bar = svg('g', { class: 'kforge-errorbar', 'data-series': key, 'data-id': points[i].id, stroke: colour, 'stroke-width': 1.5 });
        bar.appendChild(svg('line', { x1: cx, x2: cx, y1: lo, y2: hi }));
        bar.appendChild(svg('line', { x1: cx - 4, x2: cx + 4, y1: lo, y2: lo }));
        bar.appendChild(svg('line', { x1: cx - 4, x2: cx + 4, y1: hi, y2: hi }));
        chart.appendChild(bar);
      }
      const span = intervalText(ci);
      chart.appendChild(
        svg(
          'circle',
          { cx: x(i), cy: y(v as number), r: 4, fill: colour },
          svg('title', undefined, points[i].busy ? `${points[i].id}: ${spreadText(v, ci)} vs ${key} (busy)` : `${points[i].id}: ${speedupText(v, ci)} vs ${key}${span ? ` (${span})` : ''}`)
        )
      );
    }
  }
  points.forEach((p, i) => chart.appendChild(svg('text', { x: x(i) - 8, y: height - 6, 'font-size': 11 }, p.id)));
  return el(
    'figure',
    { class: 'kforge-figure' },
    el(
      'figcaption',
      undefined,
      points.some(p => p.eagerCi || p.compileCi)
        ? 'speedup per correct candidate (higher is better; bars: 95 % interval): '
        : 'speedup per correct candidate (higher is better): ',
      el('span', { class: 'kforge-key', 'data-series': 'eager' }, '● vs eager'),
      ' ',
      el('span', { class: 'kforge-key', 'data-series': 'compile' }, '● vs torch.compile')
    ),
    chart
  );
}

/** How close each correct candidate comes to the speed of light, as a bar per candidate. A
 * fraction above 100 % is a full bar marked "ceiling underestimated", never a longer one. */
export function rooflineBars(history: Candidate[]): Element {
  const rows = history.filter(a => a.result.state === 'correct' && a.result.roofline?.fraction_of_sol != null);
  if (rows.length === 0) {
    return muted('no roofline position yet (needs a real timing and a known device peak)');
  }
  return el(
    'div',
    { class: 'kforge-bars', 'data-chart': 'roofline' },
    el('div', undefined, 'fraction of the speed of light (roofline)'),
    ...rows.map(a => {
      const frac = a.result.roofline?.fraction_of_sol as number;
      const over = frac > 1 || !!a.result.roofline?.ceiling_exceeded;
      const bar = el('span', { class: 'kforge-bar', 'data-ceiling': over ? 'underestimated' : null });
      bar.style.width = `${over ? 100 : Math.min(Math.max(frac, 0), 1) * 100}%`;
      return el(
        'div',
        { class: 'kforge-bar-row', 'data-id': a.id },
        el('span', { class: 'kforge-bar-label' }, a.id),
        el('span', { class: 'kforge-bar-track' }, bar),
        el(
          'span',
          { title: over ? `measured ${percent(frac)}: no honest kernel beats the hardware, so the ceiling is too low` : null },
          `${rooflineText(frac, over)} (${a.result.roofline?.bound || '?'}-bound)`
        )
      );
    })
  );
}

function heat(x: number): string {
  const v = Math.min(Math.max(x, 0), 1);
  return `rgb(${255 - Math.round(75 * v)},${Math.round(255 * (1 - v))},${Math.round(255 * (1 - v))})`;
}

/** |candidate - reference|, max-pooled: a heat map for 2-D outputs, bars for 1-D ones. */
export function errorMap(map: ErrorMap | null | undefined): Element {
  if (!map || !map.values || map.values.length === 0) {
    return muted(
      'no error map (the outputs matched, the check stopped before comparing values, or the ' +
        'record keeps maps for its latest candidates only)'
    );
  }
  const shape = map.shape.join('x');
  if (map.kind === '1d') {
    const values = map.values as number[];
    const topValue = Math.max(...values) || 1;
    const chart = svg('svg', {
      class: 'kforge-chart',
      viewBox: `0 0 ${values.length * 8} 100`,
      preserveAspectRatio: 'none',
      'data-chart': 'error-map'
    });
    values.forEach((v, i) =>
      chart.appendChild(
        svg(
          'rect',
          { x: i * 8, y: 100 - (v / topValue) * 100, width: 7, height: (v / topValue) * 100, fill: '#c62828' },
          svg('title', undefined, `bin ${i}: ${num(v, 3)}`)
        )
      )
    );
    return el(
      'figure',
      { class: 'kforge-figure' },
      el('figcaption', undefined, `max |error| per bin, output shape ${shape}; tallest ${num(topValue, 3)}`),
      chart
    );
  }
  const rows = map.values as number[][];
  const cols = rows[0]?.length || 0;
  const topValue = Math.max(0, ...rows.map(r => Math.max(0, ...r))) || 1;
  const chart = svg('svg', {
    class: 'kforge-chart kforge-heatmap',
    viewBox: `0 0 ${cols} ${rows.length}`,
    preserveAspectRatio: 'none',
    'shape-rendering': 'crispEdges',
    'data-chart': 'error-map'
  });
  rows.forEach((row, r) =>
    row.forEach((v, c) =>
      chart.appendChild(
        svg(
          'rect',
          { x: c, y: r, width: 1, height: 1, fill: heat(v / topValue) },
          svg('title', undefined, `bin (${r}, ${c}): ${num(v, 3)}`)
        )
      )
    )
  );
  return el(
    'figure',
    { class: 'kforge-figure' },
    el(
      'figcaption',
      undefined,
      `max |error| over the output (shape ${shape}), pooled to ${rows.length}x${cols}; white 0, dark red ${num(topValue, 3)}`
    ),
    chart
  );
}

/** Top kernels of one lane, with a bar of each one's share of the lane's time. */
export function kernelTable(kernels: Kernel[], lane: string): Element {
  const total = kernels.reduce((sum, k) => sum + k.total_us, 0) || 1;
  return table(
    ['kernel', 'calls', 'total us', 'share'],
    kernels.map(k => {
      const bar = el('span', { class: 'kforge-bar', 'data-lane': lane });
      bar.style.width = `${(k.total_us / total) * 100}%`;
      return [k.name, String(k.calls), fixed(k.total_us, 1), el('span', { class: 'kforge-bar-track' }, bar)];
    }),
    { 'data-lane': lane }
  );
}

/** The best candidate's profiled calls: a reference lane and a candidate lane on one time axis. */
export function timeline(reference: KernelEvent[], candidate: KernelEvent[]): Element {
  const lanes: [string, KernelEvent[]][] = [
    ['reference', reference],
    ['candidate', candidate]
  ];
  const end = Math.max(1, ...lanes.flatMap(([, events]) => events.map(e => e.start_us + e.duration_us)));
  const width = 640;
  const label = 80;
  const laneHeight = 24;
  const chart = svg('svg', {
    class: 'kforge-chart',
    viewBox: `0 0 ${width} ${18 + 2 * (laneHeight + 8)}`,
    'data-chart': 'timeline'
  });
  chart.appendChild(svg('text', { x: label, y: 12, 'font-size': 11 }, '0 us'));
  chart.appendChild(svg('text', { x: width - 70, y: 12, 'font-size': 11 }, `${num(end, 3)} us`));
  lanes.forEach(([lane, events], row) => {
    const y = 18 + row * (laneHeight + 8);
    chart.appendChild(svg('text', { x: 0, y: y + 16, 'font-size': 12 }, lane));
    for (const e of events) {
      chart.appendChild(
        svg(
          'rect',
          {
            x: label + (e.start_us / end) * (width - label),
            y,
            width: Math.max((e.duration_us / end) * (width - label), 0.8),
            height: laneHeight,
            class: 'kforge-lane',
            'data-lane': lane
          },
          svg('title', undefined, `${e.name}: ${fixed(e.duration_us, 1)} us at ${fixed(e.start_us, 1)} us`)
        )
      );
    }
  });
  return el(
    'figure',
    { class: 'kforge-figure' },
    el('figcaption', undefined, 'kernel timeline of the best candidate (hover a box for its name)'),
    chart
  );
}
