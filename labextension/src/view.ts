/**
 * The one view of a kforge run record, live while the run goes (anywidget, widget.ts) and, once
 * it has ended, the record the cell keeps (JupyterLab MIME renderer, index.ts). Framework-free
 * DOM, text only (see dom.ts).
 *
 *   header       problem, target, device, provider; "iteration i/N" and Stop while running (and
 *                that Kernel > Interrupt stops it too), the end state and why once finished
 *   notes        timings that are not performance figures, the busy banner (a timing taken on a
 *                busy machine), notices, "run record — not live" (the report: no kernel
 *                behind it, whether the run just ended here or the notebook was opened from
 *                disk)
 *   status       what the session does now, and the kernel's reply to the last action
 *   candidates   one chip per candidate (unique ids), with its speedup and 95 % interval
 *                ("1.42x ±6%"), its head-to-head with the best of its time ("faster than 0.0
 *                side by side"), "tie" / "same as 0.0"; on a busy CPU its own time and that
 *                head-to-head first, then the speedup with its interval written out
 *                ("0.45 ms · faster than 0.2 side by side · 1.90x (1.2-3.1x)"); a click shows
 *                it in the tabs
 *   tree         the candidates tree (tree.ts): parent -> child, lineage, pinned / pruned;
 *                Pin / Unpin / Prune / Unprune per candidate while running (live only)
 *   tabs         Code (code, diff, editor; an evaluated edit is shown once judged) | Errors
 *                (the failing line marked and scrolled to) | Correctness (the trials asked for
 *                and the one at another batch size, the criterion and its margin) | Profile (one
 *                profiled call, labelled, beside the timed median) | Performance | Recommendation
 *                (Accept / Edit / Redirect / Skip / Stop while running; iterations numbered from
 *                1 as the header does)
 *
 * Stable hooks for tests and styles: div.kforge-run[data-renderer=widget|mime][data-state=
 * running|finished], [data-role=header|status|candidate|tree], button[data-tab], [data-pane],
 * button[data-action], button[data-steer], textarea[data-input=edit|redirect|code].
 */
import { drawPlots, errorMap, kernelTable, laneSpan, rooflineBars, speedupChart, speedupPoints, timeline } from './charts';
import { commonMode, longBaseline, shortBaseline } from './baselines';
import { diffView } from './diff';
import { Child, badge, codeBlock, el, muted, replace, table } from './dom';
import {
  Action,
  Candidate,
  RunRecord,
  Steer,
  Timing,
  busyText,
  decided,
  firstLine,
  fixed,
  fromText,
  intervalText,
  num,
  ownMs,
  ownTimeText,
  percent,
  rooflineText,
  shownSpeedup,
  speedupText,
  versusTag,
  versusText
} from './record';
import { treeTitle, treeView } from './tree';

export type Renderer = 'widget' | 'mime';

export interface Host {
  renderer: Renderer;
  /** Hands an action to the kernel (the widget's model.send); absent in the report. */
  send?: (action: Action) => void;
}

export const TABS = ['code', 'errors', 'correctness', 'profile', 'performance', 'recommendation'] as const;
export type Tab = (typeof TABS)[number];
const TITLES: Record<Tab, string> = {
  code: 'Code',
  errors: 'Errors',
  correctness: 'Correctness',
  profile: 'Profile',
  performance: 'Performance',
  recommendation: 'Recommendation'
};
const DECISIONS = ['accept', 'edit', 'redirect', 'skip', 'stop'] as const;
type Decision = (typeof DECISIONS)[number];
const NOT_LIVE = 'run record — not live';
const INTERRUPT = 'Stop, or Kernel > Interrupt, stops the run after its current step';

function textBox(input: string, placeholder: string, rows: number): HTMLTextAreaElement {
  return el('textarea', { 'data-input': input, placeholder, rows, spellcheck: 'false', class: 'kforge-input' });
}

export class RunView {
  readonly root: HTMLDivElement;
  private record: RunRecord | null = null;
  private message = '';
  private selected: string | null = null; // null: the latest candidate (the best once finished)
  private tab: Tab = 'code';
  private shownPending = '';
  private drawn = new Map<string, string>(); // section -> key of what it shows now
  private readonly headInfo = el('div', { class: 'kforge-header-info' });
  private readonly stopButton = el('button', { 'data-action': 'stop', class: 'kforge-button', 'data-kind': 'danger' }, 'Stop');
  private readonly header = el('div', { class: 'kforge-header', 'data-role': 'header' }, this.headInfo);
  private readonly notes = el('div', { class: 'kforge-notes' });
  private readonly statusText = el('span', { class: 'kforge-status-text' });
  private readonly messageText = el('span', { class: 'kforge-reply', 'data-role': 'message' });
  private readonly strip = el('div', { class: 'kforge-strip', 'data-role': 'candidates' });
  private readonly treeSummary = el('summary', { class: 'kforge-tree-title' }, 'Candidates tree');
  private readonly treeBody = el('div', { class: 'kforge-tree-body' });
  private readonly tree = el('details', { class: 'kforge-tree-box', 'data-role': 'tree', open: true }, this.treeSummary, this.treeBody);
  private steering = false; // a Pin / Prune was sent: its buttons wait for the kernel's answer
  private readonly tabButtons = {} as Record<Tab, HTMLButtonElement>;
  private readonly panes = {} as Record<Tab, HTMLElement>;
  private readonly views = {} as Record<Tab, HTMLElement>;
  private readonly editor = textBox('code', 'edit the candidate here, then evaluate it', 16);
  private editorFilled = '';
  private readonly evaluateButton = el('button', { 'data-action': 'evaluate', class: 'kforge-button', 'data-kind': 'primary' }, 'Evaluate my edit');
  private readonly buttons = {} as Record<Decision, HTMLButtonElement>;
  private readonly editText = textBox('edit', 'the recommendation, edited: Edit sends this', 4);
  private editFilled = '';
  private editFor = ''; // the recommendation the Edit box was filled from
  private readonly redirectText = textBox('redirect', 'your own instruction: Redirect sends this', 3);
  private readonly controls: HTMLElement;
  private readonly interruptHint = el('span', { class: 'kforge-muted', 'data-role': 'stop-hint' }, INTERRUPT);
  private editsBefore: Set<string> | null = null; // ids when "Evaluate my edit" was pressed
  private scrollErrors = false; // the Errors pane's marked line is brought into view when shown

  constructor(parent: HTMLElement, private readonly host: Host) {
    this.root = el('div', { class: 'kforge-run', 'data-renderer': host.renderer, 'data-state': 'running' });
    const tabs = el('div', { class: 'kforge-tabs', role: 'tablist' });
    for (const tab of TABS) {
      const button = el('button', { 'data-tab': tab, role: 'tab', class: 'kforge-tab' }, TITLES[tab]);
      button.addEventListener('click', () => this.show(tab));
      this.tabButtons[tab] = button;
      tabs.appendChild(button);
      this.views[tab] = el('div', { class: 'kforge-pane-view' });
      this.panes[tab] = el('section', { 'data-pane': tab, role: 'tabpanel', class: 'kforge-pane' }, this.views[tab]);
    }
    this.stopButton.addEventListener('click', () => this.send({ action: 'stop' }));
    this.evaluateButton.addEventListener('click', () => this.evaluate());
    this.panes.code.appendChild(
      el(
        'div',
        { class: 'kforge-editor' },
        el('h4', undefined, 'your edit'),
        this.editor,
        el('div', { class: 'kforge-row' }, this.evaluateButton, this.notLive())
      )
    );
    const kinds: Record<Decision, string> = { accept: 'success', edit: 'info', redirect: 'warning', skip: 'plain', stop: 'danger' };
    for (const kind of DECISIONS) {
      this.buttons[kind] = el('button', { 'data-action': kind, class: 'kforge-button', 'data-kind': kinds[kind] }, kind[0].toUpperCase() + kind.slice(1));
      this.buttons[kind].addEventListener('click', () => this.decide(kind));
    }
    this.controls = el(
      'div',
      { class: 'kforge-controls' },
      el('div', { class: 'kforge-row' }, ...DECISIONS.map(k => this.buttons[k]), this.notLive()),
      el('label', undefined, el('b', undefined, 'Edit'), ': change the recommendation, then press Edit', this.editText),
      el('label', undefined, el('b', undefined, 'Redirect'), ': ask for something else, then press Redirect', this.redirectText)
    );
    this.root.append(
      this.header,
      this.notes,
      el('div', { class: 'kforge-status', 'data-role': 'status' }, this.statusText, this.messageText),
      this.strip,
      this.tree,
      tabs,
      ...TABS.map(t => this.panes[t])
    );
    parent.appendChild(this.root);
  }

  /** Whether a kernel is behind this view: the widget; never the report. */
  get live(): boolean {
    return this.host.send !== undefined;
  }

  /** Beside the editor's and the decisions' buttons in the report: why they are off. */
  private notLive(): HTMLElement | null {
    return this.live ? null : el('span', { class: 'kforge-muted' }, NOT_LIVE);
  }

  /** "Evaluate my edit": the candidate it becomes is shown in the tabs once it arrives. */
  private evaluate(): void {
    this.editsBefore = new Set((this.record?.history || []).map(a => a.id));
    this.send({ action: 'evaluate', code: this.editor.value });
  }

  /** Draw a (new) record; `message` is the kernel's reply to the last action. */
  update(record: RunRecord, message = ''): void {
    this.record = record;
    this.message = message;
    const edit = this.editsBefore && record.history.find(a => a.kind === 'manual' && !this.editsBefore!.has(a.id));
    if (edit) {
      this.editsBefore = null;
      this.selected = edit.id; // the edit's verdict, in every tab, not the candidate before it
    }
    if (this.steering) {
      this.steering = false; // the kernel answered: the tree's buttons are drawn afresh
      this.drawn.delete('tree');
    }
    this.render();
  }

  /** Show candidate `id` in the tabs (null: follow the latest). */
  select(id: string | null): void {
    this.selected = id;
    this.render();
  }

  show(tab: Tab): void {
    this.tab = tab;
    this.render();
  }

  private send(action: Action): void {
    if (this.live && this.host.send) {
      this.host.send(action);
    }
  }

  private steer(action: Steer, id: string): void {
    this.send({ action, id });
    this.steering = true;
    for (const button of Array.from(this.treeBody.querySelectorAll('button[data-steer]'))) {
      (button as HTMLButtonElement).disabled = true; // until the kernel answers
    }
  }

  private decide(kind: Decision): void {
    const text = kind === 'edit' ? this.editText.value : kind === 'redirect' ? this.redirectText.value : undefined;
    this.send(text === undefined ? { action: kind } : { action: kind, text });
    for (const button of Object.values(this.buttons)) {
      button.disabled = true; // until the kernel answers with a new record or a message
    }
  }

  private render(): void {
    const r = this.record;
    if (!r) {
      return;
    }
    const running = r.state === 'running';
    this.root.setAttribute('data-state', r.state);
    this.root.setAttribute('data-run-id', r.run_id || '');
    const sel = this.selection(r);
    const index = sel ? r.history.indexOf(sel) : -1;
    // the diff is against the candidate it was made from, else the one judged before it
    const parent = sel?.parent ? r.history.find(a => a.id === sel.parent && a.code) : undefined;
    const previous = parent || r.history.slice(0, Math.max(index, 0)).reverse().find(a => a.code) || null;
    if (this.live && r.pending && r.recommendation) {
      const key = `${r.recommendation.iteration}:${r.recommendation.parent}:${r.recommendation.title}`; // a beam asks per branch
      if (key !== this.shownPending) {
        this.shownPending = key; // a new question: show it once, then leave the tabs to the user
        this.tab = 'recommendation';
      }
    }
    this.drawHeader(r);
    this.section('notes', JSON.stringify([r.timing_note, r.busy, r.notices, r.confirmation, r.summary.error]), this.notes, () => this.drawNotes(r));
    this.statusText.textContent = r.status;
    this.messageText.textContent = this.message ? ` — ${this.message}` : '';
    const strip = r.history.map(a => `${a.id}:${a.result.state}:${this.chipSpeed(a)}:${this.chipTag(a)}`).join(',');
    this.section('strip', `${strip}|${r.best_id}|${sel?.id}`, this.strip, () => this.drawStrip(r, sel));
    const steerable = this.live && running;
    const nodes = r.history.map(a => [
      a.id,
      a.result.state,
      a.parent,
      a.lineage,
      a.applied,
      a.result.timing?.candidate_ms,
      a.result.timing?.speedup_vs_eager_ci,
      a.same_as,
      a.tie_with,
      a.result.timing?.noisy,
      a.result.timing?.busy,
      a.result.timing?.candidate_low_ms,
      a.result.timing?.versus
    ]);
    const tree = JSON.stringify([nodes, r.best_id, r.search, sel?.id, steerable]);
    this.treeSummary.textContent = treeTitle(r);
    this.tree.hidden = r.history.length === 0; // the strip says "no candidate yet"
    this.section('tree', tree, this.treeBody, () =>
      treeView(r, {
        steer: steerable ? (action, id) => this.steer(action, id) : undefined,
        select: id => this.select(id),
        selected: sel?.id ?? null
      })
    );
    const id = sel ? `${sel.id}:${sel.result.state}` : '';
    this.section('code', `${id}|${previous?.id}|${r.best_id}`, this.views.code, () => this.drawCode(r, sel, previous));
    this.section('errors', id, this.views.errors, () => this.drawErrors(sel));
    this.section('correctness', `${id}|${!!sel?.error_map}|${r.trials}`, this.views.correctness, () => this.drawCorrectness(r, sel));
    const events = r.profile?.candidate_events?.length || 0;
    this.section('profile', `${id}|${r.best_id}|${events}`, this.views.profile, () => this.drawProfile(r, sel));
    const times = r.history
      .map(a => `${a.id}:${a.result.state}:${a.result.timing?.candidate_ms}:${this.chipSpeed(a)}:${this.chipTag(a)}:${a.decision}`)
      .join(',');
    this.section('performance', `${times}|${r.best_id}|${sel?.id}`, this.views.performance, () => this.drawPerformance(r, sel));
    const rec = JSON.stringify([r.recommendation, r.pending, r.state, r.decisions, r.summary.reason, r.best_id, r.progress]);
    this.section('recommendation', rec, this.views.recommendation, () => this.drawRecommendation(r));
    for (const tab of TABS) {
      this.tabButtons[tab].setAttribute('aria-selected', String(tab === this.tab));
      this.panes[tab].hidden = tab !== this.tab;
    }
    drawPlots(this.panes[this.tab]); // plotly draws at the width a visible pane has
    if (this.tab === 'errors' && this.scrollErrors) {
      this.scrollErrors = false;
      const marked = this.views.errors.querySelector('.kforge-line[data-mark]') as HTMLElement | null;
      const code = marked?.closest('pre');
      if (marked && code) {
        code.scrollTop = Math.max(marked.offsetTop - code.offsetTop - code.clientHeight / 3, 0);
      }
    }

    const code = sel?.code || '';
    if (this.editor.value === this.editorFilled && code !== this.editorFilled) {
      this.editor.value = this.editorFilled = code; // the user's own edit is never overwritten
    }
    const asked = r.recommendation;
    const recText = asked?.text || '';
    const recFor = asked ? `${asked.iteration}:${asked.parent}:${asked.title}` : '';
    if (recFor !== this.editFor) {
      // a new recommendation: the Edit box holds it, whatever was typed for the last one (that
      // was sent, or is moot), and the Redirect box is empty again
      this.editFor = recFor;
      this.editText.value = this.editFilled = recText;
      this.redirectText.value = '';
    } else if (this.editText.value === this.editFilled && recText !== this.editFilled) {
      this.editText.value = this.editFilled = recText;
    }
    this.evaluateButton.disabled = !this.live;
    this.editor.readOnly = this.editText.readOnly = this.redirectText.readOnly = !this.live;
    if (running) {
      this.panes.recommendation.appendChild(this.controls);
      for (const kind of DECISIONS) {
        this.buttons[kind].disabled = !this.live || (kind === 'stop' ? false : !r.pending);
      }
    } else {
      this.controls.remove(); // finished: nothing left to decide
    }
  }

  private section(name: string, key: string, node: Element, build: () => Child[]): void {
    if (this.drawn.get(name) !== key) {
      replace(node, ...build());
      this.drawn.set(name, key);
    }
  }

  private selection(r: RunRecord): Candidate | null {
    const chosen = this.selected === null ? undefined : r.history.find(a => a.id === this.selected);
    if (chosen) {
      return chosen;
    }
    if (r.state === 'finished' && r.best_id) {
      return r.history.find(a => a.id === r.best_id) || null;
    }
    return r.history[r.history.length - 1] || null;
  }

  private drawHeader(r: RunRecord): void {
    const s = r.summary;
    const p = r.progress;
    const running = r.state === 'running';
    let stats = `${s.candidates} candidates · ${fixed(s.elapsed_s, 0)} s · tokens ${s.input_tokens} in / ${s.output_tokens} out · $${fixed(s.cost_usd, 4)}`;
    if (r.best_id && s.candidate_ms != null) {
      // the best's own timing (its head-to-head, its own time), the summary's where the
      // history has no entry for it
      const best = r.history.find(a => a.id === r.best_id);
      const t: Timing = { ...s, ...(best?.result.timing || {}) };
      const versus = versusText(t.versus);
      if (t.busy) {
        // under load: its own time and its head-to-head lead; the ratios to eager and
        // torch.compile, whose own times swing, come after with their intervals written out
        stats += ` · best ${r.best_id}: ${ownTimeText(t)}${versus ? `, ${versus}` : ''}`;
        stats += t.speedup_vs_eager ? `, ${shownSpeedup(t, 'eager', !!t.noisy)} vs eager` : '';
        stats += t.speedup_vs_compile ? `, ${shownSpeedup(t, 'compile')} vs ${longBaseline(t.compile_mode)}` : '';
      } else {
        stats += ` · best ${r.best_id}: ${num(t.candidate_ms)} ms`;
        stats += t.speedup_vs_eager ? `, ${speedupText(t.speedup_vs_eager, t.speedup_vs_eager_ci, !!t.noisy)} vs eager` : '';
        stats += t.speedup_vs_compile ? `, ${speedupText(t.speedup_vs_compile, t.speedup_vs_compile_ci)} vs ${longBaseline(t.compile_mode)}` : '';
        stats += versus ? `, ${versus}` : '';
      }
    }
    replace(
      this.headInfo,
      el(
        'div',
        { class: 'kforge-title' },
        el('b', undefined, 'kforge'),
        ` · ${s.problem} on ${s.target} (${r.device || '?'}) · ${s.provider || 'provider pending'}`,
        r.model ? ` · ${r.model}` : '',
        ` · mode ${r.mode}`,
        r.search && r.search.strategy ? ` · search ${r.search.strategy}${r.search.width > 1 ? ` (width ${r.search.width})` : ''}` : ''
      ),
      running
        ? el(
            'div',
            { class: 'kforge-progress', 'data-role': 'progress' },
            `iteration ${p.iteration}/${p.iterations} `,
            el('progress', { max: Math.max(p.iterations, 1), value: Math.min(s.iterations, p.iterations) })
          )
        : el('div', { class: 'kforge-progress kforge-finished', 'data-role': 'progress' }, `finished: ${s.reason || 'ended'}`),
      s.advice && !running ? el('div', { class: 'kforge-advice', 'data-role': 'advice' }, s.advice) : null,
      el('div', { class: 'kforge-stats' }, stats)
    );
    if (running) {
      this.header.append(this.stopButton, ...(this.live ? [this.interruptHint] : []));
      this.stopButton.disabled = !this.live;
      this.stopButton.title = this.live ? INTERRUPT : NOT_LIVE;
    } else {
      this.stopButton.remove();
      this.interruptHint.remove();
    }
  }

  private drawNotes(r: RunRecord): Child[] {
    return [
      r.timing_note
        ? el('div', { class: 'kforge-note', 'data-role': 'timing-note' }, `⚠ timings are NOT performance figures here: ${r.timing_note}`)
        : null,
      r.busy ? el('div', { class: 'kforge-note', 'data-role': 'busy' }, `⚠ ${busyText(r.busy.note || '', r.busy.ids || [])}`) : null,
      ...r.notices.map(text => el('div', { class: 'kforge-notice' }, text)),
      r.confirmation ? el('div', { class: 'kforge-notice', 'data-role': 'confirmation' }, r.confirmation) : null,
      r.summary.error ? el('div', { class: 'kforge-note' }, `⚠ ${r.summary.error}`) : null,
      !this.live
        ? el(
            'div',
            { class: 'kforge-notice', 'data-role': 'saved-note' },
            `${NOT_LIVE}: the record the notebook keeps; the buttons and the editor are off (with ` +
              "the run's kernel, `%kforge eval VAR` judges an edit and `%kforge last` shows the run again)"
          )
        : null
    ];
  }

  private drawStrip(r: RunRecord, sel: Candidate | null): Child[] {
    if (r.history.length === 0) {
      return [muted('no candidate yet')];
    }
    return r.history.map(a => {
      const chip = el(
        'button',
        {
          class: 'kforge-chip',
          'data-role': 'candidate',
          'data-id': a.id,
          'data-state': a.result.state,
          'aria-pressed': String(a === sel),
          'data-tie': a.tie_with && !a.same_as ? a.tie_with : null,
          'data-same-as': a.same_as || null,
          'data-versus': a.result.timing?.versus?.verdict || null,
          title: [
            firstLine(a.result.message, 300),
            a.result.timing?.busy ? ownTimeText(a.result.timing) : '',
            versusText(a.result.timing?.versus),
            intervalText(a.result.timing?.speedup_vs_eager_ci),
            a.result.timing?.noise_note,
            a.result.timing?.busy_note
          ]
            .filter(x => x)
            .join(' · ')
        },
        `${a.id} ${a.result.state}${this.chipSpeed(a) ? ` ${this.chipSpeed(a)}` : ''}${a.id === r.best_id ? ' ★' : ''}${this.chipTag(a) ? ` · ${this.chipTag(a)}` : ''}`
      );
      chip.addEventListener('click', () => this.select(a.id));
      return chip;
    });
  }

  /** A correct candidate's speedup vs eager with its interval, for its chip ("" otherwise);
   * on a busy CPU its own time and its head-to-head first, then the speedup with its interval
   * written out: "0.45 ms · faster than 0.2 side by side · 1.90x (1.2-3.1x)". */
  private chipSpeed(a: Candidate): string {
    const t = a.result.timing || {};
    if (a.result.state !== 'correct' || !t.real) {
      return '';
    }
    if (t.busy && ownMs(t) != null) {
      const versus = this.sameOrTie(a) ? '' : this.versusOf(a);
      return [`${num(ownMs(t))} ms`, versus, t.speedup_vs_eager ? shownSpeedup(t, 'eager', !!t.noisy, true) : ''].filter(x => x).join(' · ');
    }
    return t.speedup_vs_eager ? speedupText(t.speedup_vs_eager, t.speedup_vs_eager_ci, !!t.noisy) : '';
  }

  /** What a chip says after its speedup: "same as 0.0", "tie with 0.0 (side by side)", or
   * (not busy: a busy chip's speed part said it) its head-to-head "faster than 0.0 side by
   * side". */
  private chipTag(a: Candidate): string {
    return this.sameOrTie(a) || (a.result.timing?.busy ? '' : this.versusOf(a));
  }

  /** The head-to-head's few words, for a correct candidate judged itself (not a repeat). */
  private versusOf(a: Candidate): string {
    return a.result.state === 'correct' && !a.same_as ? versusTag(a.result.timing?.versus) : '';
  }

  /** "same as 0.0" (its code repeats 0.0's: not judged again) or "tie with 0.0" ("tie with 0.0
   * side by side" where its head-to-head says so). */
  private sameOrTie(a: Candidate): string {
    if (a.same_as) {
      return `same as ${a.same_as}`;
    }
    const v = a.result.timing?.versus;
    return a.tie_with ? `tie with ${a.tie_with}${decided(v) && v.id === a.tie_with ? ' side by side' : ''}` : '';
  }

  private head(a: Candidate, r?: RunRecord): HTMLElement {
    const best = r && a.id === r.best_id ? ' ★ best' : '';
    return el('div', { class: 'kforge-pane-head' }, badge(a.result.state), ` candidate ${a.id} (${a.kind})${best}`);
  }

  private drawCode(r: RunRecord, sel: Candidate | null, previous: Candidate | null): Child[] {
    if (!sel) {
      return [muted('no candidate yet')];
    }
    return [
      this.head(sel, r),
      sel.agent_notes ? el('div', { class: 'kforge-muted', 'data-role': 'agent-notes' }, `agent: ${sel.agent_notes}`) : null,
      codeBlock(sel.code),
      el(
        'h4',
        undefined,
        previous
          ? `diff against ${previous.id === sel.parent ? 'its parent, ' : ''}candidate ${previous.id}`
          : 'diff against the previous candidate'
      ),
      diffView(previous?.code || null, sel.code, previous?.id || '')
    ];
  }

  private drawErrors(sel: Candidate | null): Child[] {
    this.scrollErrors = false;
    if (!sel) {
      return [muted('no candidate yet')];
    }
    const r = sel.result;
    if (r.state === 'correct') {
      return [el('div', undefined, badge('correct'), ` candidate ${sel.id}: no errors`)];
    }
    const err = r.error || {};
    const log = err.traceback || (err.log ? `log: ${err.log}` : '');
    this.scrollErrors = !!err.line && !!sel.code; // brought into view when the pane shows
    return [
      el('div', { class: 'kforge-pane-head' }, badge(r.state), ' ', el('b', undefined, err.type || ''), ` candidate ${sel.id}`),
      el('pre', { class: 'kforge-error' }, r.message),
      r.rules && r.rules.length ? el('div', undefined, `guardrail rules fired: ${r.rules.join(', ')}`) : null,
      err.line ? el('div', { 'data-role': 'error-line' }, `line ${err.line}: `, el('code', undefined, (err.source_line || '').trim())) : null,
      sel.code ? codeBlock(sel.code, err.line) : null,
      log ? el('details', undefined, el('summary', undefined, 'full log'), el('pre', { class: 'kforge-log' }, log)) : null
    ];
  }

  private drawCorrectness(r: RunRecord, sel: Candidate | null): Child[] {
    if (!sel) {
      return [muted('no candidate yet')];
    }
    const result = sel.result;
    const c = result.correctness || {};
    if (!c.trials) {
      return [el('div', undefined, badge(result.state), ` the candidate did not reach the correctness check (${firstLine(result.message, 200)})`)];
    }
    const tol = c.tolerance || {};
    // the trials asked for, then one at another batch size (EvalOptions.trial_plan)
    const asked = r.trials && r.trials < c.trials ? r.trials : null;
    const trials = asked
      ? `${c.passed_trials} of ${c.trials}: the ${asked} asked for (--trials ${asked}) and ${c.trials - asked} at another batch size, so that no shape is hard-coded`
      : `${c.passed_trials} of ${c.trials}`;
    const shapeLabel = asked ? 'shape / dtype (the last trial: at another batch size)' : 'shape / dtype';
    const rows: Child[][] = [
      [shapeLabel, `${(c.shape || []).join('x')} ${c.dtype || ''}`],
      ['trials passed', trials],
      ['criterion', criterionText(tol)],
      ['max abs error', marginText(c.max_abs_error, tol)],
      ['relative error norm', tol.rel_norm != null ? `${num(c.rel_norm_error, 3)} (bound ${num(tol.rel_norm, 3)}: near-zero outputs cannot pass as zeros)` : num(c.rel_norm_error, 3)],
      [
        'max rel error',
        `${num(c.max_rel_error, 3)} (|a−b| / |b| is largest where the reference is near zero, where atol decides: shown, not the criterion)`
      ],
      ['mismatch fraction', percent(c.mismatch_fraction)]
    ];
    if (c.failed_check) {
      rows.push(['failed check', c.failed_check]);
    }
    const worst = c.worst || [];
    return [
      el('div', undefined, badge(result.state), ` ${result.message.slice(0, 300)}`),
      table(['', ''], rows, { 'data-role': 'correctness-stats' }),
      worst.length ? el('h4', undefined, 'worst positions') : null,
      worst.length ? table(['index', 'got', 'expected'], worst.map(w => [`[${w.index.join(', ')}]`, num(w.got, 6), num(w.expected, 6)])) : null,
      errorMap(sel.error_map, noMapReason(sel))
    ];
  }

  private drawProfile(r: RunRecord, sel: Candidate | null): Child[] {
    if (!sel || !sel.kernels) {
      return [muted('profiles are taken for correct candidates only')];
    }
    const p = sel.result.profile || {};
    const t = sel.result.timing || {};
    const events = r.profile || {};
    const traces = [p.trace, p.reference_trace].filter(x => x);
    const calls = p.profiled_calls && p.profiled_calls > 1 ? ` (the median of ${p.profiled_calls} profiled calls)` : '';
    const best = sel.id === r.best_id && (events.candidate_events || []).length;
    return [
      el(
        'div',
        { class: 'kforge-verdict', 'data-role': 'profile-label' },
        el('div', undefined, el('b', undefined, `one profiled call of candidate ${sel.id}${calls}`), ', not the timed median:'),
        el('div', undefined, profiledVersusTimed('candidate', p.kernel_us?.candidate, t.candidate_ms, t.rounds)),
        el('div', undefined, profiledVersusTimed('reference (eager)', p.kernel_us?.reference, t.eager_ms, t.rounds)),
        p.note ? el('div', { class: 'kforge-note', 'data-role': 'profile-note' }, `⚠ ${p.note}`) : null
      ),
      el('h4', undefined, `top kernels of candidate ${sel.id} in that call`),
      kernelTable(sel.kernels.candidate, 'candidate'),
      el('h4', undefined, 'top kernels of the reference (eager) in its call'),
      kernelTable(sel.kernels.reference, 'reference'),
      best
        ? timeline(
            events.reference_events || [],
            events.candidate_events || [],
            `kernel timeline of the same profiled call: candidate kernels over ${num(laneSpan(events.candidate_events || []), 4)} µs, ` +
              `eager's over ${num(laneSpan(events.reference_events || []), 4)} µs, each from its first kernel (gaps between kernels included); ` +
              `the timed median is ${num(t.candidate_ms)} ms (drag to zoom, hover a bar for its kernel)`
          )
        : muted('the kernel timeline is kept for the best candidate'),
      traces.length ? el('div', { class: 'kforge-muted' }, `Chrome traces (open in https://ui.perfetto.dev): ${traces.join(', ')}`) : null
    ];
  }

  /** The selected candidate's verdict in a few lines (result.py Result.summary): its time, its
   * speedups and its head-to-head with the best of its time; on a busy CPU its own time and
   * that head-to-head first, the speedups after with their intervals written out. */
  private verdictLines(a: Candidate): string[] {
    const t = a.result.timing || {};
    if (a.result.state !== 'correct' || t.candidate_ms == null) {
      return [];
    }
    if (!t.real) {
      return [`candidate ${num(t.candidate_ms)} ms (${t.note || 'not a performance figure'})`];
    }
    const speeds = [
      t.speedup_vs_eager ? `${shownSpeedup(t, 'eager', !!t.noisy)} vs eager` : '',
      t.speedup_vs_compile ? `${shownSpeedup(t, 'compile')} vs ${longBaseline(t.compile_mode)}` : ''
    ].filter(x => x);
    const versus = t.versus ? `head-to-head (beside the best when it was judged, in the same rounds): ${versusText(t.versus)}` : '';
    if (t.busy) {
      const eager = t.eager_ms != null ? ` (eager's blocks' median ${num(t.eager_ms)} ms: it carries the load)` : '';
      return [`candidate ${ownTimeText(t)}`, versus, speeds.length ? `${speeds.join(', ')}${eager}` : '', `busy: ${t.busy_note || 'the machine was busy while timing'}`].filter(
        x => x
      );
    }
    return [[`candidate ${num(t.candidate_ms)} ms`, ...speeds].join(', '), versus].filter(x => x);
  }

  private drawPerformance(r: RunRecord, sel: Candidate | null): Child[] {
    const rows = r.history.map(a => {
      const t = a.result.timing || {};
      const row = el(
        'tr',
        { 'data-role': 'candidate-row', 'data-id': a.id, 'aria-selected': String(a === sel) },
        ...[
          `${a.id}${a.id === r.best_id ? ' ★' : ''}`,
          a.kind,
          badge(a.result.state),
          t.busy && t.candidate_low_ms
            ? el('span', { 'data-ms': 'own', title: ownTimeText(t) }, `${num(t.candidate_low_ms)} own (busy)`)
            : num(t.candidate_ms) + (t.busy ? ' (busy)' : ''),
          el('span', { 'data-speedup': 'eager', title: intervalText(t.speedup_vs_eager_ci) || null }, shownSpeedup(t, 'eager', !!t.noisy, true)),
          el('span', { 'data-speedup': 'compile', title: intervalText(t.speedup_vs_compile_ci) || null }, shownSpeedup(t, 'compile', false, true)),
          rooflineText(a.result.roofline?.fraction_of_sol, !!a.result.roofline?.ceiling_exceeded),
          fromText(a),
          [this.sameOrTie(a), a.result.state === 'correct' ? '' : firstLine(a.result.message, 90)].filter(x => x).join('; '),
          a.result.state === 'correct' && !a.same_as && t.versus ? el('span', { 'data-role': 'versus' }, versusText(t.versus)) : ''
        ].map(c => el('td', undefined, c))
      );
      row.addEventListener('click', () => this.select(a.id));
      return row;
    });
    const mode = commonMode(r.history.map(a => a.result.timing));
    const header = ['#', 'kind', 'verdict', 'ms', 'vs eager', `vs ${shortBaseline(mode)}`, 'of roofline', 'from', 'message', 'side by side'];
    const lines = sel ? this.verdictLines(sel) : [];
    return [
      lines.length
        ? el(
            'div',
            { class: 'kforge-verdict', 'data-role': 'verdict', 'data-id': sel?.id ?? null, 'data-busy': !!sel?.result.timing?.busy },
            el('h4', undefined, `candidate ${sel?.id}${sel?.id === r.best_id ? ' ★ best' : ''}`),
            ...lines.map(line => el('div', { class: 'kforge-verdict-line' }, line))
          )
        : null,
      speedupChart(speedupPoints(r.history)),
      rooflineBars(r.history),
      el('h4', undefined, 'candidates'),
      el(
        'table',
        { class: 'kforge-table kforge-candidates' },
        el('thead', undefined, el('tr', undefined, ...header.map(h => el('th', undefined, h)))),
        el('tbody', undefined, ...rows)
      )
    ];
  }

  private drawRecommendation(r: RunRecord): Child[] {
    const rec = r.recommendation;
    return [
      rec
        ? el(
            'div',
            { class: 'kforge-rec', 'data-role': 'recommendation' },
            el(
              'div',
              undefined,
              el('b', undefined, rec.title),
              ` (for iteration ${rec.iteration + 1}/${r.progress.iterations}, whose candidates are ${rec.iteration}.*${rec.parent ? `; about candidate ${rec.parent}` : ''})`
            ),
            el('div', { class: 'kforge-rec-text' }, rec.text),
            rec.expected_gain ? el('div', undefined, `expected gain: ${rec.expected_gain}`) : null
          )
        : muted('no recommendation yet: the analysis agent speaks once a candidate is correct'),
      el('div', { class: 'kforge-decision-state', 'data-role': 'decision-state' }, this.decisionState(r)),
      r.decisions.length
        ? el(
            'ol',
            { class: 'kforge-decisions' },
            ...r.decisions.map(d => el('li', undefined, `iteration ${d.iteration + 1}: ${d.kind}${d.text ? ` — ${d.text.slice(0, 160)}` : ''}`))
          )
        : null,
      el(
        'div',
        { class: 'kforge-muted', 'data-role': 'decisions-budget' },
        `--iterations ${r.progress.iterations}: the first iteration writes the first candidate (and fixes it until it is correct); ` +
          `each later one applies one decision, so at most ${Math.max(r.progress.iterations - 1, 0)} decisions`
      )
    ];
  }

  private decisionState(r: RunRecord): string {
    if (r.state === 'finished') {
      const best = r.best_id ? `best is candidate ${r.best_id}` : 'no correct candidate';
      return `session finished: ${r.summary.reason || 'ended'}; ${best}`;
    }
    if (r.pending) {
      return 'waiting for your decision: Accept, Edit, Redirect, Skip or Stop';
    }
    if (r.mode !== 'review') {
      return r.recommendation ? 'accepted automatically (--mode auto)' : 'recommendations are accepted automatically (--mode auto)';
    }
    return r.recommendation?.decision ? `decided: ${r.recommendation.decision}` : 'no recommendation yet';
  }
}

/** The check every element passes (evaluator/correctness.py): |a − b| <= atol·scale + rtol·|b|. */
function criterionText(tol: { atol?: number; rtol?: number; policy?: string; atol_scaled?: number; widened_by_reference_error?: number }): string {
  if (tol.atol == null || tol.rtol == null) {
    return '-';
  }
  const scaled = tol.atol_scaled != null && tol.atol_scaled !== tol.atol ? ` (atol·scale ${num(tol.atol_scaled, 3)}: scale is the output's RMS)` : '';
  // correctness.ill_conditioned: the reference was itself that far from its float64 answer
  const widened = tol.widened_by_reference_error
    ? `; where the reference is ill-conditioned (its own float32 error is large), held to the float64 answer with ${tol.widened_by_reference_error}x the reference's own error as slack`
    : '';
  return `every element: |candidate − reference| <= atol + rtol·|reference|, atol ${num(tol.atol, 3)}${scaled}, rtol ${num(tol.rtol, 3)} (policy ${tol.policy || '?'})${widened}`;
}

/** The largest |a − b| against the smallest allowance the criterion gives (atol·scale): how
 * much of its margin the worst element used, at most. */
function marginText(maxAbs: number | null | undefined, tol: { atol?: number; atol_scaled?: number }): string {
  const allowance = tol.atol_scaled ?? tol.atol;
  if (maxAbs == null || !allowance) {
    return num(maxAbs, 3);
  }
  const used = maxAbs / allowance;
  return used <= 1
    ? `${num(maxAbs, 3)}: at most ${num(used * 100, 2)}% of the smallest allowance (${num(allowance, 3)}), within the criterion`
    : `${num(maxAbs, 3)}: ${num(used, 3)}x the smallest allowance (${num(allowance, 3)}); elements with a larger |reference| are allowed more`;
}

/** Why a candidate's Correctness tab has no error map: the one reason that applies. */
function noMapReason(a: Candidate): string {
  if (a.error_map_dropped) {
    return 'this record keeps the maps of its latest candidates only';
  }
  if (a.result.state === 'correct') {
    return 'every trial matched';
  }
  const check = a.result.correctness?.failed_check;
  return `the check stopped before comparing values${check ? ` (${check})` : ''}: ${firstLine(a.result.message, 160)}`;
}

/** "candidate: kernels 407.6 µs in this call; timed median 0.3829 ms over 12 rounds, 0.94x the
 * call's kernels" (what the Profile tab sets beside each other). */
function profiledVersusTimed(lane: string, kernelUs: number | null | undefined, timedMs: number | null | undefined, rounds: number | undefined): string {
  const kernels = kernelUs != null ? `kernels ${num(kernelUs, 4)} µs in this call` : 'kernels: -';
  if (timedMs == null) {
    return `${lane}: ${kernels}`;
  }
  const relation = kernelUs ? `, ${num((timedMs * 1000) / kernelUs, 3)}x this call's kernels` : '';
  return `${lane}: ${kernels}; timed median ${num(timedMs)} ms${rounds ? ` over ${rounds} rounds` : ''}${relation}`;
}
