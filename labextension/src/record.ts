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
  /** torch.compile's mode the compile figures were timed against ('default' or
   * 'max-autotune'; see baselines.ts); missing in older records (the default mode). */
  compile_mode?: string | null;
  speedup_spread?: number | null;
  /** Interleaved rounds of timed blocks per side. */
  rounds?: number;
  /** 95 % intervals [low, high] of the speedups; missing or null in older records. */
  speedup_vs_eager_ci?: number[] | null;
  speedup_vs_compile_ci?: number[] | null;
  /** The interval stayed wider than the evaluator's goal; the note says so in a sentence. */
  noisy?: boolean;
  noise_note?: string;
  /** The machine was busy while timing; the note says what was seen. */
  busy?: boolean;
  busy_note?: string;
  /** The median over rounds of each block's low calls: the candidate's own time with the
   * noise a contested CPU adds mostly left out; missing in older records. */
  candidate_low_ms?: number | null;
  /** The head-to-head with the best of its time, timed in the same rounds (what decides which
   * is best); null where there was no rival, missing in older records. */
  versus?: Versus | null;
}

/** kforge_nb/result.py Timing.versus: `ratio` is the rival's time over this one's (above 1:
 * this one is faster); a void one has `why` instead of a ratio. */
export interface Versus {
  id: string;
  verdict: 'faster' | 'slower' | 'tie' | 'void';
  ratio?: number;
  ci?: number[] | null;
  noise?: number;
  stat?: string;
  rounds?: number;
  rival_ms?: number;
  candidate_ms?: number;
  why?: string;
  rival_wrong?: boolean;
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
  tolerance?: { atol?: number; rtol?: number; policy?: string; rel_norm?: number; atol_scaled?: number; widened_by_reference_error?: number };
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
  /** `note`: where the profiled call and the timed median differ more than 2x (evaluator
   * figures.py profile_note); `profiled_calls`: how many calls were profiled (the median one
   * is shown); `kernel_us`: each lane's kernel time in that one call. */
  profile?: {
    trace?: string | null;
    reference_trace?: string | null;
    note?: string | null;
    profiled_calls?: number | null;
    kernel_us?: { candidate: number; reference: number } | null;
  } | null;
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
  /** It had an error map, left out: a record keeps the latest candidates' maps only. */
  error_map_dropped?: boolean;
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
  /** The best it tied with: side by side where its `versus` says so (a run saved before
   * head-to-heads: faster on its point, but not beyond their intervals). */
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
  /** The trials asked for (--trials); a verdict counts one more at another batch size where
   * its shape could change. Missing in older records. */
  trials?: number;
  status: string;
  notices: string[];
  confirmation?: string | null;   // the final judging, in words (--confirm)
  best_id: string | null;
  history: Candidate[];
  /** Missing in records saved before the search existed. */
  search?: Search | null;
  /** The candidates tree as drawn (kforge_nb/ui/fallback.py tree_layout): depth first, one row
   * per candidate; missing in records saved before it (the view lists those flat). */
  tree?: TreeRow[];
  recommendation: Recommendation | null;
  pending: boolean;
  decisions: { iteration: number; kind: string; text: string }[];
  profile: { reference_events?: KernelEvent[]; candidate_events?: KernelEvent[] };
}

/** A row of the candidates tree: its depth, whether it is greyed (pruned, or under a pruned
 * candidate: never expanded again) and its lineage's label (A, B, ...). */
export interface TreeRow {
  id: string;
  depth: number;
  greyed: boolean;
  lineage?: string | null;
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

/** A speedup with its interval written out (kforge_nb/intervals.py spread_text): "5.00x (95 %
 * interval 2-20x)", `compact`: "5.00x (2-20x)"; the point alone without an interval. */
export function spreadText(point: number | null | undefined, ci?: unknown, noisy = false, compact = false): string {
  if (point === null || point === undefined) {
    return '-';
  }
  const bounds = validCi(ci);
  const span = bounds ? `${num(bounds[0], 3)}-${num(bounds[1], 3)}x` : '';
  return `${point.toFixed(2)}x${span ? (compact ? ` (${span})` : ` (95 % interval ${span})`) : ''}${noisy ? ' (noisy)' : ''}`;
}

/** A speedup as a view shows it (intervals.py shown_speedup): "1.42x ±6%", but on a busy CPU
 * with its interval written out: there it spans the block medians' and the low calls', wide
 * and lopsided. */
export function shownSpeedup(t: Timing, baseline: 'eager' | 'compile' = 'eager', noisy = false, compact = false): string {
  const point = baseline === 'eager' ? t.speedup_vs_eager : t.speedup_vs_compile;
  const ci = baseline === 'eager' ? t.speedup_vs_eager_ci : t.speedup_vs_compile_ci;
  return t.busy ? spreadText(point, ci, noisy, compact) : speedupText(point, ci, noisy);
}

/** The time a view leads with: on a busy CPU the candidate's own time (its blocks' low calls)
 * where the record has it, else its blocks' median. */
export function ownMs(t: Timing): number | null | undefined {
  return t.busy && t.candidate_low_ms ? t.candidate_low_ms : t.candidate_ms;
}

/** "0.55 ms, its own time (its blocks' low calls: the load mostly left out; their medians
 * 0.9 ms)" on a busy CPU; "0.625 ms" otherwise. */
export function ownTimeText(t: Timing): string {
  if (t.candidate_ms === null || t.candidate_ms === undefined) {
    return '';
  }
  if (t.busy && t.candidate_low_ms) {
    return `${num(t.candidate_low_ms)} ms, its own time (its blocks' low calls: the load mostly left out; their medians ${num(t.candidate_ms)} ms)`;
  }
  return `${num(t.candidate_ms)} ms`;
}

/** Whether a head-to-head has a verdict (faster, slower or a tie), not void. */
export function decided(v: Versus | null | undefined): v is Versus & { ratio: number } {
  return !!v && (v.verdict === 'faster' || v.verdict === 'slower' || v.verdict === 'tie') && typeof v.ratio === 'number';
}

/** A head-to-head in words (intervals.py versus_text, named): "1.21x faster than 0.0 side by
 * side (95 % interval 1.15-1.27x)", "tie with 0.0 side by side at 1.02x (...): within ±3%, ...",
 * "0.80x, slower than 0.0 side by side (...)", "no head-to-head with 0.0: why". */
export function versusText(v: Versus | null | undefined): string {
  if (!v || !v.id) {
    return '';
  }
  if (!decided(v)) {
    return `no head-to-head with ${v.id}: ${v.why || 'it was not timed'}`;
  }
  const bounds = validCi(v.ci);
  const span = bounds ? ` (95 % interval ${num(bounds[0], 3)}-${num(bounds[1], 3)}x)` : '';
  if (v.verdict === 'faster') {
    return `${v.ratio.toFixed(2)}x faster than ${v.id} side by side${span}`;
  }
  if (v.verdict === 'slower') {
    return `${v.ratio.toFixed(2)}x, slower than ${v.id} side by side${span}`;
  }
  const noise = `${((v.noise || 0) * 100).toFixed(0)}%`;
  return `tie with ${v.id} side by side at ${v.ratio.toFixed(2)}x${span}: within ±${noise}, what one kernel shows against itself, or an interval across 1x`;
}

/** A head-to-head in a few words (intervals.py versus_tag): "faster than 0.0 side by side",
 * "slower than ...", "tie with 0.0 side by side", "no head-to-head with 0.0"; "" without one. */
export function versusTag(v: Versus | null | undefined): string {
  if (!v || !v.id) {
    return '';
  }
  if (!decided(v)) {
    return `no head-to-head with ${v.id}`;
  }
  return v.verdict === 'tie' ? `tie with ${v.id} side by side` : `${v.verdict} than ${v.id} side by side`;
}

export const CEILING_NOTE = 'ceiling underestimated';

/** A fraction of the speed of light; above 1 (or flagged) never shown as more than 100 %. */
export function rooflineText(fraction: number | null | undefined, exceeded = false): string {
  if (fraction === null || fraction === undefined) {
    return '-';
  }
  return exceeded || fraction > 1 ? `>100% (${CEILING_NOTE})` : percent(fraction);
}

const BUSY_LEAD = 'the machine was busy while timing';

/** The busy banner's text (intervals.py busy_text): where the note opens with the same words
 * (the evaluator's does), the note with the candidates named in it, said once. */
export function busyText(note: string, ids: string[] = []): string {
  const which = ids.length ? `candidate${ids.length > 1 ? 's' : ''} ${ids.join(', ')}` : '';
  if (note.startsWith(BUSY_LEAD)) {
    return BUSY_LEAD + (which ? ` ${which}` : '') + note.slice(BUSY_LEAD.length);
  }
  return `${BUSY_LEAD}${which ? ` (${which})` : ''}: speedups may be off${note ? `; ${note}` : ''}`;
}

/** The "from" cell: the decision and its words, the person's own where they edited or
 * redirected (not the recommendation they turned away from). */
export function fromText(a: Candidate): string {
  const own = (a.decision === 'edit' || a.decision === 'redirect') && a.decision_text;
  const words = own ? a.decision_text : a.recommendation;
  return (a.decision || '') + (words ? `: ${words.slice(0, 60)}` : '');
}
