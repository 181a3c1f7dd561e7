/**
 * JupyterLab renderer for a kforge-nb run report: `application/vnd.kforge.run+json`.
 *
 * The record (kforge_nb/ui/report.py, `run_record`) holds the session summary, every candidate
 * with its verdict, timings and code, the event log and the best candidate's kernel profile.
 * This view draws: a header with the verdict, a note when timings are not real, a table of
 * candidates (click a row to see its code), a speedup chart and the event log. It builds DOM
 * nodes with textContent only: nothing from the record is parsed as HTML.
 */
import { IRenderMime } from '@jupyterlab/rendermime-interfaces';
import { Widget } from '@lumino/widgets';

export const MIME_TYPE = 'application/vnd.kforge.run+json';

interface Timing {
  real?: boolean;
  note?: string;
  candidate_ms?: number | null;
  speedup_vs_eager?: number | null;
  speedup_vs_compile?: number | null;
}

interface Attempt {
  iteration: number;
  sample: number;
  kind: string;
  code: string | null;
  result: {
    state: string;
    message: string;
    timing?: Timing;
    roofline?: { fraction_of_sol?: number | null; bound?: string | null };
  };
  recommendation?: string | null;
  decision?: string | null;
}

interface RunRecord {
  version: number;
  running: boolean;
  mode?: string;
  device?: string | null;
  timing_note?: string | null;
  summary: {
    problem: string;
    target: string;
    provider: string;
    reason: string;
    candidates: number;
    iterations: number;
    candidate_ms?: number | null;
    speedup_vs_eager?: number | null;
    speedup_vs_compile?: number | null;
    timing_real?: boolean | null;
    input_tokens: number;
    output_tokens: number;
    cost_usd: number;
    elapsed_s: number;
    artifacts: string;
    error?: string | null;
  };
  best: { iteration: number; sample: number; code: string } | null;
  history: Attempt[];
  events: { kind: string; iteration: number; time: number; data: any }[];
}

const STATE_COLOURS: { [state: string]: string } = {
  correct: '#2e7d32',
  mismatch: '#ef6c00',
  compile_failure: '#c62828',
  runtime_error: '#ad1457',
  rejected: '#6a1b9a',
  generation_failure: '#616161',
  unavailable: '#455a64'
};

function el<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  text?: string,
  className?: string
): HTMLElementTagNameMap[K] {
  const node = document.createElement(tag);
  if (text !== undefined) {
    node.textContent = text;
  }
  if (className) {
    node.className = className;
  }
  return node;
}

function num(value: number | null | undefined, digits = 4, suffix = ''): string {
  return value === null || value === undefined ? '-' : value.toPrecision(digits) + suffix;
}

function badge(state: string): HTMLElement {
  const node = el('span', state, 'kforge-badge');
  node.style.background = STATE_COLOURS[state] || '#616161';
  return node;
}

/** The header: what ran, how it ended, the best speedup. */
function header(record: RunRecord): HTMLElement {
  const s = record.summary;
  const box = el('div', undefined, 'kforge-header');
  box.appendChild(el('b', 'kforge '));
  box.appendChild(
    el('span', `${s.problem} on ${s.target} (${record.device || '?'}) · ${s.provider || ''}`)
  );
  const status = record.running ? 'running…' : s.reason || 'not started';
  const line = el('div', `${s.candidates} candidates over ${s.iterations} iterations · ${status}`);
  if (s.speedup_vs_eager) {
    line.textContent +=
      ` · best ${num(s.candidate_ms)} ms, ${num(s.speedup_vs_eager, 3)}x vs eager` +
      (s.speedup_vs_compile ? `, ${num(s.speedup_vs_compile, 3)}x vs torch.compile` : '');
  }
  box.appendChild(line);
  if (record.timing_note || s.timing_real === false) {
    box.appendChild(
      el('div', `⚠ timings are not performance figures: ${record.timing_note || ''}`, 'kforge-note')
    );
  }
  if (s.error) {
    box.appendChild(el('div', `⚠ ${s.error}`, 'kforge-note'));
  }
  return box;
}

/** One row per candidate; clicking a row shows its code below the table. */
function candidates(record: RunRecord, code: HTMLElement): HTMLElement {
  const table = el('table', undefined, 'kforge-table');
  const head = el('tr');
  for (const title of ['#', 'kind', 'verdict', 'ms', 'vs eager', 'vs compile', 'of roofline', 'from', 'message']) {
    head.appendChild(el('th', title));
  }
  table.appendChild(head);
  const best = record.best;
  record.history.forEach(attempt => {
    const r = attempt.result;
    const t = r.timing || {};
    const row = el('tr');
    const isBest = best && best.iteration === attempt.iteration && best.sample === attempt.sample;
    row.appendChild(el('td', `${attempt.iteration}.${attempt.sample}${isBest ? ' ★' : ''}`));
    row.appendChild(el('td', attempt.kind));
    const verdict = el('td');
    verdict.appendChild(badge(r.state));
    row.appendChild(verdict);
    row.appendChild(el('td', num(t.candidate_ms)));
    row.appendChild(el('td', num(t.speedup_vs_eager, 3, 'x')));
    row.appendChild(el('td', num(t.speedup_vs_compile, 3, 'x')));
    const sol = r.roofline?.fraction_of_sol;
    row.appendChild(el('td', sol === null || sol === undefined ? '-' : `${(sol * 100).toFixed(1)}%`));
    row.appendChild(
      el('td', (attempt.decision || '') + (attempt.recommendation ? `: ${attempt.recommendation}` : ''))
    );
    row.appendChild(el('td', r.state === 'correct' ? '' : r.message.split('\n')[0].slice(0, 120)));
    row.title = 'click to show this candidate';
    row.onclick = () => showCode(code, attempt);
    table.appendChild(row);
  });
  return table;
}

function showCode(target: HTMLElement, attempt: Attempt): void {
  target.textContent = '';
  target.appendChild(el('div', `candidate ${attempt.iteration}.${attempt.sample} (${attempt.result.state})`));
  target.appendChild(el('pre', attempt.code || '(no code)', 'kforge-code'));
}

/** Speedup vs eager (blue) and vs torch.compile (orange) per correct candidate, as SVG. */
function speedupChart(record: RunRecord): SVGElement | null {
  const points = record.history.filter(a => a.result.state === 'correct' && a.result.timing?.speedup_vs_eager);
  if (points.length === 0) {
    return null;
  }
  const ns = 'http://www.w3.org/2000/svg';
  const width = 480;
  const height = 160;
  const values = points.flatMap(a => [a.result.timing?.speedup_vs_eager || 0, a.result.timing?.speedup_vs_compile || 0]);
  const top = Math.max(1.2, ...values) * 1.1;
  const x = (i: number) => 40 + (i * (width - 60)) / Math.max(points.length - 1, 1);
  const y = (v: number) => height - 20 - (v / top) * (height - 30);
  const svg = document.createElementNS(ns, 'svg');
  svg.setAttribute('width', String(width));
  svg.setAttribute('height', String(height));
  const one = document.createElementNS(ns, 'line');
  one.setAttribute('x1', '40');
  one.setAttribute('x2', String(width - 20));
  one.setAttribute('y1', String(y(1)));
  one.setAttribute('y2', String(y(1)));
  one.setAttribute('stroke', '#999');
  one.setAttribute('stroke-dasharray', '4 3');
  svg.appendChild(one);
  const series: [keyof Timing, string][] = [
    ['speedup_vs_eager', '#1565c0'],
    ['speedup_vs_compile', '#ef6c00']
  ];
  for (const [key, colour] of series) {
    points.forEach((a, i) => {
      const v = a.result.timing?.[key] as number | null | undefined;
      if (!v) {
        return;
      }
      const dot = document.createElementNS(ns, 'circle');
      dot.setAttribute('cx', String(x(i)));
      dot.setAttribute('cy', String(y(v)));
      dot.setAttribute('r', '4');
      dot.setAttribute('fill', colour);
      const title = document.createElementNS(ns, 'title');
      title.textContent = `${a.iteration}.${a.sample}: ${v.toFixed(2)}x ${key.replace('speedup_', '')}`;
      dot.appendChild(title);
      svg.appendChild(dot);
    });
  }
  const label = document.createElementNS(ns, 'text');
  label.setAttribute('x', '2');
  label.setAttribute('y', String(y(1) + 4));
  label.setAttribute('font-size', '10');
  label.textContent = '1x';
  svg.appendChild(label);
  return svg;
}

function eventLog(record: RunRecord): HTMLElement {
  const details = el('details');
  details.appendChild(el('summary', `event log (${record.events.length} events)`));
  const t0 = record.events.length ? record.events[0].time : 0;
  const list = el('pre', undefined, 'kforge-log');
  list.textContent = record.events
    .map(e => {
      const d = e.data || {};
      const what = d.state || d.title || d.kind || d.reason || d.text || d.phase || '';
      return `${(e.time - t0).toFixed(1).padStart(7)} s  [${e.iteration}] ${e.kind} ${what}`;
    })
    .join('\n');
  details.appendChild(list);
  return details;
}

export class RunView extends Widget implements IRenderMime.IRenderer {
  constructor(options: IRenderMime.IRendererOptions) {
    super();
    this.addClass('kforge-run');
  }

  renderModel(model: IRenderMime.IMimeModel): Promise<void> {
    const record = model.data[MIME_TYPE] as unknown as RunRecord;
    this.node.textContent = '';
    this.node.appendChild(header(record));
    const code = el('div', undefined, 'kforge-code-box');
    this.node.appendChild(candidates(record, code));
    const chart = speedupChart(record);
    if (chart) {
      this.node.appendChild(el('div', 'speedup per correct candidate (blue: vs eager, orange: vs torch.compile)'));
      this.node.appendChild(chart);
    }
    const best = record.history.find(
      a => record.best && a.iteration === record.best.iteration && a.sample === record.best.sample
    );
    if (best) {
      showCode(code, best);
    }
    this.node.appendChild(code);
    this.node.appendChild(eventLog(record));
    const s = record.summary;
    this.node.appendChild(
      el(
        'div',
        `tokens ${s.input_tokens} in / ${s.output_tokens} out · $${s.cost_usd.toFixed(4)} · ` +
          `${s.elapsed_s} s · artifacts ${s.artifacts}`,
        'kforge-footer'
      )
    );
    return Promise.resolve();
  }
}

export const rendererFactory: IRenderMime.IRendererFactory = {
  safe: true,
  mimeTypes: [MIME_TYPE],
  createRenderer: options => new RunView(options)
};

const extension: IRenderMime.IExtension = {
  id: 'kforge-nb-labextension:run-report',
  rendererFactory,
  rank: 0, // preferred over the bundle's text/html fallback
  dataType: 'json'
};

export default extension;
