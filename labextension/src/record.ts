/**
 * The run record: what kforge_nb/ui/report.py `run_record(session)` returns, the only input of
 * the view. Data only: every string in it is shown as text, never parsed as HTML.
 */
export const MIME_TYPE = 'application/vnd.kforge.run+json';

export type State = 'running' | 'finished';

export interface Timing {
  real?: boolean;
  note?: string;
  candidate_ms?: number | null;
  eager_ms?: number | null;
  compile_ms?: number | null;
  speedup_vs_eager?: number | null;
  speedup_vs_compile?: number | null;
  speedup_spread?: number | null;
  /** 95 % intervals [low, high] of the speedups; missing or null in older records. */
  speedup_vs_eager_ci?: number[] | null;
  speedup_vs_compile_ci?: number[] | null;
  /** The interval stayed wider than the evaluator's goal; the note says so in a sentence. */
  noisy?: boolean;
  noise_note?: string;
  /** The machine was busy while timing; the note says what was seen. */
  busy?: boolean;
  busy_note?: string;
}

export interface Correctness {
  trials?: number;
  passed_trials?: number;
  shape?: number[] | null;
  dtype?: string | null;
  max_abs_error?: number | null;
  max_rel_error?: number | null;
  rel_norm_error?: number | null;
  mismatch_fraction?: number | null;
  worst?: { index: number[]; got: number | null; expected: number | null }[];
  tolerance?: { atol?: number; rtol?: number; policy?: string };
  failed_check?: string | null;
}

export interface ErrorInfo {
  type?: string;
  text?: string;
  line?: number | null;
  source_line?: string;
  log?: string;
  traceback?: string;
}

export interface Result {
  state: string;
  message: string;
  rules?: string[];
  error?: ErrorInfo | null;
  correctness?: Correctness | null;
  timing?: Timing | null;
  /** ceiling_exceeded: above 1 the measured ceiling is too low (views cap the bar). */
  roofline?: { fraction_of_sol?: number | null; bound?: string | null; ceiling_exceeded?: boolean } | null;
  profile?: { trace?: string | null; reference_trace?: string | null } | null;
}

export interface Kernel {
  name: string;
  calls: number;
  total_us: number;
}

export interface ErrorMap {
  kind: '1d' | '2d';
  shape: number[];
  values: number[] | number[][];
}

export interface Candidate {
  id: string;
  iteration: number;
  sample: number;
  kind: string;
  code: string | null;
  result: Result;
  kernels?: { candidate: Kernel[]; reference: Kernel[] } | null;
  error_map?: ErrorMap | null;
  recommendation?: string | null;
  decision?: string | null;
  decision_text?: string | null;
  /** The id of the candidate it was made from; missing (a record saved before the search) or
   * null: a root of the candidates tree. */
  parent?: string | null;
  /** The id of the first correct candidate of its line. */
  lineage?: string | null;
  /** The title of the change it was asked to make. */
  applied?: string | null;
  /** The earlier candidate whose code it repeats (comments aside): not judged again. */
  same_as?: string | null;
  /** The best it was faster than on its point, but not beyond their intervals: a tie. */
  tie_with?: string | null;
  /** What the agent says of what it wrote (the builtin agent: each asked change applied,
   * already so, or not applied); missing in a resumed run's earlier candidates. */
  agent_notes?: string | null;
}

export interface Recommendation {
  iteration: number;
  title: string;
  text: string;
  expected_gain?: string | null;
  decision?: string | null;
  /** The candidate it is about. */
  parent?: string | null;
}

/** The search over candidates (`--search`), and how the person steered it. */
export interface Search {
  strategy: string;
  width: number;
  pinned: string[];
  pruned: string[];
  /** The ids the analyst had nothing more for. */
  finished: string[];
}

export interface KernelEvent {
  name: string;
  start_us: number;
  duration_us: number;
}

export interface RunRecord {
  version: number;
  run_id: string;
  state: State;
  mode: string;
  summary: {
    advice?: string | null;
    problem: string;
    target: string;
    provider: string;
    reason: string;
    candidates: number;
    iterations: number;
    candidate_ms?: number | null;
    speedup_vs_eager?: number | null;
    speedup_vs_compile?: number | null;
    speedup_vs_eager_ci?: number[] | null;
    speedup_vs_compile_ci?: number[] | null;
    noisy?: boolean;
    input_tokens: number;
    output_tokens: number;
    cost_usd: number;
    elapsed_s: number;
    artifacts: string;
    error?: string | null;
  };
  model?: string | null;
  device?: string | null;
  timing_note?: string | null;
  /** The candidates timed on a busy machine and the latest's note; null when none was. */
  busy?: { ids: string[]; note: string } | null;
  progress: { iteration: number; iterations: number };
  status: string;
  notices: string[];
  confirmation?: string | null;   // the final judging, in words (--confirm)
  best_id: string | null;
  history: Candidate[];
  /** Missing in records saved before the search existed. */
  search?: Search | null;
  recommendation: Recommendation | null;
  pending: boolean;
  decisions: { iteration: number; kind: string; text: string }[];
  profile: { reference_events?: KernelEvent[]; candidate_events?: KernelEvent[] };
}

/** What the view sends back to the kernel (kforge_nb/ui/widget.py `handle_message`). */
export interface Action {
  action: 'accept' | 'edit' | 'redirect' | 'skip' | 'stop' | 'evaluate' | Steer;
  text?: string;
  code?: string;
  /** The candidate a Steer action is about. */
  id?: string;
}

/** The candidates tree's actions: steer the search (Session.pin / Session.prune). */
export type Steer = 'pin' | 'unpin' | 'prune' | 'unprune';

export function num(value: number | null | undefined, digits = 4, suffix = ''): string {
  return value === null || value === undefined ? '-' : `${Number(value.toPrecision(digits))}${suffix}`;
}

export function fixed(value: number | null | undefined, digits = 2, suffix = ''): string {
  return value === null || value === undefined ? '-' : `${value.toFixed(digits)}${suffix}`;
}

export function percent(value: number | null | undefined): string {
  return value === null || value === undefined ? '-' : `${(value * 100).toFixed(1)}%`;
}

export function firstLine(text: string | null | undefined, length = 120): string {
  return (text || '').split('\n')[0].slice(0, length);
}

/** [low, high] as two finite numbers with low <= high, else null (older records, bad data). */
export function validCi(ci: unknown): [number, number] | null {
  if (!Array.isArray(ci) || ci.length !== 2) {
    return null;
  }
  const [low, high] = ci.map(Number);
  return Number.isFinite(low) && Number.isFinite(high) && low <= high ? [low, high] : null;
}

/** "±6%": the interval's half-width as a share of the point; "" without an interval. */
export function pmText(point: number | null | undefined, ci: unknown): string {
  const bounds = validCi(ci);
  if (!bounds || !point || !Number.isFinite(point)) {
    return '';
  }
  const pct = ((bounds[1] - bounds[0]) / 2 / Math.abs(point)) * 100;
  return pct < 0.95 ? `±${pct.toFixed(1)}%` : `±${pct.toFixed(0)}%`;
}

/** A speedup as every view writes it (kforge_nb/intervals.py): "1.42x ±6%", "1.42x", "-". */
export function speedupText(point: number | null | undefined, ci?: unknown, noisy = false): string {
  if (point === null || point === undefined) {
    return '-';
  }
  const pm = pmText(point, ci);
  return `${point.toFixed(2)}x${pm ? ` ${pm}` : ''}${noisy ? ' (noisy)' : ''}`;
}

/** "95 % interval 1.33-1.51x" for titles; "" without one. */
export function intervalText(ci: unknown): string {
  const bounds = validCi(ci);
  return bounds ? `95 % interval ${num(bounds[0], 3)}-${num(bounds[1], 3)}x` : '';
}

export const CEILING_NOTE = 'ceiling underestimated';

/** A fraction of the speed of light; above 1 (or flagged) never shown as more than 100 %. */
export function rooflineText(fraction: number | null | undefined, exceeded = false): string {
  if (fraction === null || fraction === undefined) {
    return '-';
  }
  return exceeded || fraction > 1 ? `>100% (${CEILING_NOTE})` : percent(fraction);
}

/** The busy banner's text. */
export function busyText(note: string, ids: string[] = []): string {
  const which = ids.length ? ` (candidate${ids.length > 1 ? 's' : ''} ${ids.join(', ')})` : '';
  return `the machine was busy while timing${which}: speedups may be off${note ? `; ${note}` : ''}`;
}

/** The "from" cell: the decision and its words, the person's own where they edited or
 * redirected (not the recommendation they turned away from). */
export function fromText(a: Candidate): string {
  const own = (a.decision === 'edit' || a.decision === 'redirect') && a.decision_text;
  const words = own ? a.decision_text : a.recommendation;
  return (a.decision || '') + (words ? `: ${words.slice(0, 60)}` : '');
}
