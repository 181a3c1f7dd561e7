/**
 * Charts drawn from record data. Those a person wants to zoom into (speedups per candidate, the
 * kernel timeline, the |candidate - reference| error map) are plotly figures: zoom, pan, hover
 * and "download as PNG" come with them. plotly.js (its cartesian bundle) is loaded the first
 * time one is shown, and a figure is drawn only once its pane is visible (`drawPlots`), at the
 * width it then has. Until then, or where plotly cannot run, the figure shows its numbers as
 * text. The roofline bars and the kernel table's share bars are plain elements.
 */
import { commonMode, longBaseline } from './baselines';
import { Child, el, muted, table } from './dom';
import { Candidate, ErrorMap, Kernel, KernelEvent, fixed, num, percent, rooflineText, speedupText, spreadText, validCi } from './record';

const EAGER = '#1565c0';
const COMPILE = '#ef6c00';
const LANES = { reference: '#8e9aaf', candidate: '#1565c0' };

/** The part of plotly.js the view uses. */
interface Plotly {
  newPlot(node: HTMLElement, data: object[], layout: object, config: object): Promise<unknown>;
}
interface Figure {
  data: object[];
  layout: object;
}

const figures = new WeakMap<HTMLElement, Figure>();
let loading: Promise<Plotly | null> | null = null;

function plotly(): Promise<Plotly | null> {
  loading ??= import('plotly.js-cartesian-dist-min')
    .then(module => ((module as { default?: Plotly }).default || module) as Plotly)
    .catch(() => null);
  return loading;
}

/** `text` as plotly shows it: its pseudo-HTML (<b>, <a href>, entities) turned back into the
 * characters, so a kernel's name from a candidate's profile is shown, never read as markup. */
function plain(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

/** A figure plotly draws into `[data-chart=KIND]` once shown; `summary` (its numbers as text)
 * stands in until then, and where plotly cannot run. */
function plotted(kind: string, caption: Child[], figure: Figure, summary: Child[], attrs: Record<string, string> = {}): HTMLElement {
  const area = el('div', { class: 'kforge-plot', 'data-chart': kind, ...attrs });
  figures.set(area, figure);
  return el('figure', { class: 'kforge-figure' }, el('figcaption', undefined, ...caption), area, el('div', { class: 'kforge-plot-text' }, ...summary));
}

/** Draw the figures under `root` not drawn yet; call it when `root` is visible. */
export function drawPlots(root: Element): void {
  for (const area of Array.from(root.querySelectorAll<HTMLElement>('.kforge-plot:not([data-drawn])'))) {
    const figure = figures.get(area);
    if (!figure) {
      continue;
    }
    area.setAttribute('data-drawn', 'loading');
    void plotly().then(async lib => {
      if (!lib || !area.isConnected) {
        area.setAttribute('data-drawn', 'text'); // the numbers below stay
        return;
      }
      try {
        const base = { margin: { l: 48, r: 12, t: 8, b: 36 }, height: 260, paper_bgcolor: 'rgba(0,0,0,0)', plot_bgcolor: 'rgba(0,0,0,0)' };
        await lib.newPlot(area, figure.data, { ...base, ...figure.layout }, { responsive: true, displaylogo: false });
        area.setAttribute('data-drawn', 'plotly');
        const text = area.parentElement?.querySelector('.kforge-plot-text') as HTMLElement | null;
        if (text) {
          text.hidden = true; // the figure's hover says the same
        }
      } catch {
        area.setAttribute('data-drawn', 'text');
      }
    });
  }
}

interface Point {
  id: string;
  eager: number | null;
  compile: number | null;
  /** 95 % intervals, drawn as error bars; null where the record has none. */
  eagerCi: [number, number] | null;
  compileCi: [number, number] | null;
  /** torch.compile's mode the compile figure was timed against (see baselines.ts). */
  compileMode: string | null;
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
      compileMode: a.result.timing?.compile_mode ?? null,
      busy: !!a.result.timing?.busy
    }));
}

/** The two series: eager, and torch.compile in the mode the run was timed against. */
function series(points: Point[]) {
  const compiled = `vs ${longBaseline(commonMode(points.map(p => ({ compile_mode: p.compileMode }))))}`;
  return [
    ['eager', 'vs eager', EAGER],
    ['compile', compiled, COMPILE]
  ] as const;
}

/** Speedup vs eager (blue) and, where it was timed, vs torch.compile (orange; its mode named) per correct
 * candidate, each with its 95 % interval as an error bar where the record has one; 1x dashed.
 * A series nothing was timed against has no trace and no legend entry. */
export function speedupChart(points: Point[]): Element {
  if (points.length === 0) {
    return muted('no timed candidate yet');
  }
  const named = series(points);
  const said = (p: Point, key: 'eager' | 'compile') => {
    const ci = key === 'eager' ? p.eagerCi : p.compileCi;
    return p.busy ? `${spreadText(p[key], ci)} (busy)` : speedupText(p[key], ci);
  };
  const data = named.filter(([key]) => points.some(p => p[key])).map(([key, name, colour]) => {
    const shown = points.filter(p => p[key]);
    const ci = shown.map(p => (key === 'eager' ? p.eagerCi : p.compileCi));
    return {
      type: 'scatter',
      mode: 'lines+markers',
      name,
      x: shown.map(p => plain(p.id)),
      y: shown.map(p => p[key]),
      marker: { color: colour },
      line: { color: colour },
      error_y: {
        type: 'data',
        symmetric: false,
        array: shown.map((p, i) => (ci[i] ? Math.max(ci[i]![1] - (p[key] as number), 0) : 0)),
        arrayminus: shown.map((p, i) => (ci[i] ? Math.max((p[key] as number) - ci[i]![0], 0) : 0)),
        visible: ci.some(c => c)
      },
      text: shown.map(p => plain(`${p.id}: ${said(p, key)} ${name}`)),
      hoverinfo: 'text'
    };
  });
  const layout = {
    xaxis: { type: 'category', title: { text: 'candidate' } },
    yaxis: { title: { text: 'speedup (x)' }, rangemode: 'tozero' },
    shapes: [{ type: 'line', xref: 'paper', x0: 0, x1: 1, y0: 1, y1: 1, line: { dash: 'dash', color: '#999', width: 1 } }],
    legend: { orientation: 'h', y: 1.12 }
  };
  const bars = points.some(p => p.eagerCi || p.compileCi);
  const summary = points.flatMap(p =>
    named.filter(([key]) => p[key]).map(([key, name]) =>
      el(
        'div',
        { class: (key === 'eager' ? p.eagerCi : p.compileCi) ? 'kforge-errorbar' : null, 'data-series': key, 'data-id': p.id },
        `${p.id}: ${said(p, key)} ${name}`
      )
    )
  );
  return plotted(
    'speedup',
    [`speedup per correct candidate (higher is better${bars ? '; bars: 95 % interval' : ''}; drag to zoom, hover for numbers)`],
    { data, layout },
    summary
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

const HEAT = [
  [0, '#ffffff'],
  [1, '#b40000']
];

/** |candidate - reference|, max-pooled: a heat map for 2-D outputs, bars for 1-D ones. `none`
 * says why there is no map (the one reason that applies). */
export function errorMap(map: ErrorMap | null | undefined, none: string): Element {
  if (!map || !map.values || map.values.length === 0) {
    return muted(`no error map: ${none}`);
  }
  const shape = map.shape.join('x');
  if (map.kind === '1d') {
    const values = map.values as number[];
    const top = Math.max(...values) || 1;
    return plotted(
      'error-map',
      [`max |error| per bin, output shape ${shape}; tallest ${num(top, 3)}`],
      { data: [{ type: 'bar', y: values, marker: { color: '#c62828' }, hovertemplate: 'bin %{x}: %{y:.3g}<extra></extra>' }], layout: { xaxis: { title: { text: 'bin' } }, yaxis: { title: { text: 'max |error|' } } } },
      [`largest bin ${num(top, 3)} of ${values.length} bins`]
    );
  }
  const rows = map.values as number[][];
  const cols = rows[0]?.length || 0;
  const top = Math.max(0, ...rows.map(r => Math.max(0, ...r))) || 1;
  return plotted(
    'error-map',
    [`max |error| over the output (shape ${shape}), pooled to ${rows.length}x${cols}; white 0, dark red ${num(top, 3)}`],
    {
      data: [{ type: 'heatmap', z: rows, zmin: 0, zmax: top, colorscale: HEAT, hovertemplate: 'bin (%{y}, %{x}): %{z:.3g}<extra></extra>' }],
      layout: { yaxis: { autorange: 'reversed', scaleanchor: 'x', title: { text: 'row bin' } }, xaxis: { title: { text: 'column bin' } }, height: 360 }
    },
    [`largest |error| ${num(top, 3)} over ${rows.length}x${cols} bins`]
  );
}

/** Top kernels of one lane, with a bar of each one's share of the lane's time. */
export function kernelTable(kernels: Kernel[], lane: string): Element {
  const total = kernels.reduce((sum, k) => sum + k.total_us, 0) || 1;
  return table(
    ['kernel', 'calls', 'total µs', 'share'],
    kernels.map(k => {
      const bar = el('span', { class: 'kforge-bar', 'data-lane': lane });
      bar.style.width = `${(k.total_us / total) * 100}%`;
      return [k.name, String(k.calls), fixed(k.total_us, 1), el('span', { class: 'kforge-bar-track' }, bar)];
    }),
    { 'data-lane': lane }
  );
}

/** Microseconds from a lane's first kernel to its last one's end. */
export function laneSpan(events: KernelEvent[]): number {
  if (events.length === 0) {
    return 0;
  }
  const start = Math.min(...events.map(e => e.start_us));
  return Math.max(...events.map(e => e.start_us + e.duration_us)) - start;
}

/** One profiled call of the best candidate: a reference lane and a candidate lane, each from
 * its own first kernel (the profiler's set-up before it is not the call), kernels as bars. */
export function timeline(reference: KernelEvent[], candidate: KernelEvent[], caption: string): Element {
  const lanes = [
    ['reference', reference],
    ['candidate', candidate]
  ] as const;
  const data = lanes
    .filter(([, events]) => events.length)
    .map(([lane, events]) => {
      const start = Math.min(...events.map(e => e.start_us));
      return {
        type: 'bar',
        orientation: 'h',
        name: lane,
        y: events.map(() => lane),
        base: events.map(e => e.start_us - start),
        x: events.map(e => Math.max(e.duration_us, 0.01)),
        text: events.map(e => plain(`${e.name}: ${fixed(e.duration_us, 1)} µs at ${fixed(e.start_us - start, 1)} µs`)),
        hoverinfo: 'text',
        textposition: 'none',
        marker: { color: LANES[lane] }
      };
    });
  const layout = {
    barmode: 'overlay',
    showlegend: false,
    height: 180,
    xaxis: { title: { text: "µs from the lane's first kernel" }, rangemode: 'tozero' },
    yaxis: { automargin: true }
  };
  return plotted(
    'timeline',
    [caption],
    { data, layout },
    lanes.map(([lane, events]) => el('div', { 'data-lane': lane }, `${lane}: ${events.length} kernels over ${num(laneSpan(events), 4)} µs`))
  );
}
