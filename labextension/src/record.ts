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
  roofline?: { fraction_of_sol?: number | null; bound?: string | null } | null;
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
