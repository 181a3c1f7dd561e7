/**
 * The candidates tree: the session's candidates as the search made them, parent -> child (each
 * child is nested in its parent's `li`, indented), with their verdict, time and speedup vs eager,
 * their head-to-head with the best of their time (on a busy CPU their own time and that
 * head-to-head first, the speedup after with its interval written out), their lineage, and what
 * the person pinned and pruned. Live and running, each row has Pin /
 * Unpin (correct candidates) and Prune / Unprune buttons that steer the search.
 *
 * The tree's shape (roots, order, depth, greyed, lineage labels) comes with the record
 * (`tree`, made by kforge_nb/ui/fallback.py tree_layout, whose text and HTML fallbacks draw the
 * same rows for GitHub and nbviewer): this module only draws it. A record saved before `tree`
 * lists its candidates flat.
 *
 * Hooks: [data-role=tree] > ul.kforge-tree > li[data-role=tree-node][data-id][data-state]
 * [data-pinned][data-pruned][data-greyed][data-finished][data-best], its row
 * .kforge-tree-row, button[data-steer=pin|unpin|prune|unprune][data-id].
 */
import { Child, badge, el, muted } from './dom';
import { Candidate, RunRecord, Steer, TreeRow, decided, intervalText, num, ownMs, ownTimeText, shownSpeedup, speedupText, versusTag, versusText } from './record';

export interface TreeNode {
  candidate: Candidate;
  depth: number;
  /** Pruned, or under a pruned candidate: the search never expands it again. */
  greyed: boolean;
  lineage: string | null;
  children: TreeNode[];
}

const MAX_INDENT = 16; // deeper levels are not indented further (a long greedy chain stays narrow)

/** The record's tree rows (depth first) as nested nodes. A hand-edited record is drawn as it
 * can be: a row naming no candidate of the history, or one already drawn, is left out, and a
 * row deeper than the one before it by more than one is read as its child. */
export function candidateTree(r: RunRecord): TreeNode[] {
  const byId = new Map(r.history.map(a => [a.id, a]));
  const rows: TreeRow[] = r.tree || r.history.map(a => ({ id: a.id, depth: 0, greyed: false }));
  const forest: TreeNode[] = [];
  const open: TreeNode[] = []; // the path from a root to the row before
  for (const row of rows) {
    const candidate = byId.get(row.id);
    if (!candidate) {
      continue;
    }
    byId.delete(row.id); // drawn once
    while (open.length && open[open.length - 1].depth >= row.depth) {
      open.pop();
    }
    const node = { candidate, depth: open.length, greyed: !!row.greyed, lineage: row.lineage || null, children: [] };
    (open.length ? open[open.length - 1].children : forest).push(node);
    open.push(node);
  }
  return forest;
}

/** "Candidates tree · beam, width 2 · pinned 1.0 · pruned 0.1" */
export function treeTitle(r: RunRecord): string {
  const s = r.search;
  const facts = s && s.strategy ? [`${s.strategy}, width ${s.width ?? 1}`] : [];
  for (const what of ['pinned', 'pruned', 'finished'] as const) {
    const ids = (s && s[what]) || [];
    if (ids.length) {
      facts.push(`${what} ${ids.join(', ')}`);
    }
  }
  return ['Candidates tree', ...facts].join(' · ');
}

export interface TreeOptions {
  /** Present where the person can steer (the live widget, while the run runs): the buttons. */
  steer?: (action: Steer, id: string) => void;
  /** Show a candidate in the tabs. */
  select: (id: string) => void;
  selected: string | null;
}

/** The tree's content: a hint (live) and the nested list. */
export function treeView(r: RunRecord, options: TreeOptions): Child[] {
  if (r.history.length === 0) {
    return [muted('no candidate yet')];
  }
  const s = r.search;
  const pinned = new Set(s?.pinned || []);
  const pruned = new Set(s?.pruned || []);
  const finished = new Set(s?.finished || []);
  const ids = new Set(r.history.map(a => a.id));

  const tag = (name: string, text: string, title: string): HTMLElement =>
    el('span', { class: 'kforge-tag', 'data-tag': name, title }, text);

  const row = (node: TreeNode): HTMLElement => {
    const a = node.candidate;
    const t = a.result.timing || {};
    const correct = a.result.state === 'correct';
    const lineage = node.lineage;
    const v = t.versus;
    const tieSaid = !!a.tie_with && decided(v) && v.id === a.tie_with; // the tie tag says it
    const versus = correct && !a.same_as && v && !tieSaid ? tag('versus', versusTag(v), versusText(v)) : null;
    const speed = t.speedup_vs_eager
      ? el(
          'span',
          { class: 'kforge-tree-speed', title: `its speedup vs eager${intervalText(t.speedup_vs_eager_ci) ? ` (${intervalText(t.speedup_vs_eager_ci)})` : ''}` },
          ` ${shownSpeedup(t, 'eager', false, true)}`
        )
      : null;
    // under load its own time and its head-to-head lead, the speedup (its interval written out)
    // after; else its time and speedup, then the head-to-head
    const timing: Child[] =
      correct && t.candidate_ms != null && t.busy
        ? [el('span', { class: 'kforge-tree-time', title: `its time: ${ownTimeText(t)}` }, ` ${num(ownMs(t))} ms`), versus ? ' ' : null, versus, speed]
        : correct && t.candidate_ms != null
          ? [
              el(
                'span',
                { class: 'kforge-tree-time', title: `its time; its speedup vs eager${intervalText(t.speedup_vs_eager_ci) ? ` (${intervalText(t.speedup_vs_eager_ci)})` : ''}` },
                ` ${num(t.candidate_ms)} ms`,
                t.speedup_vs_eager ? ` ${speedupText(t.speedup_vs_eager, t.speedup_vs_eager_ci)}` : ''
              ),
              versus ? ' ' : null,
              versus
            ]
          : [];
    const pick = el('button', { class: 'kforge-tree-id', 'data-select': a.id, title: `show candidate ${a.id} in the tabs` }, a.id);
    pick.addEventListener('click', () => options.select(a.id));
    const steer: HTMLButtonElement[] = [];
    if (options.steer) {
      const send = options.steer;
      const button = (action: Steer, title: string) => {
        const b = el('button', { class: 'kforge-button kforge-mini', 'data-steer': action, 'data-id': a.id, title }, action);
        b.addEventListener('click', () => send(action, a.id));
        steer.push(b);
      };
      if (pinned.has(a.id)) {
        button('unpin', `stop expanding ${a.id} every round`);
      } else if (correct && !node.greyed) {
        button('pin', `expand ${a.id} every round, before the search's own choices`);
      }
      if (pruned.has(a.id)) {
        button('unprune', `let the search expand ${a.id} and its descendants again`);
      } else if (!node.greyed) {
        button('prune', `never expand ${a.id} or anything descended from it again`);
      }
    }
    return el(
      'div',
      { class: 'kforge-tree-row' },
      node.depth ? el('span', { class: 'kforge-tree-elbow', 'aria-hidden': 'true' }, '└') : null,
      pick,
      ' ',
      badge(a.result.state),
      ...timing,
      lineage ? tag('lineage', lineage, `lineage of candidate ${a.lineage}`) : null,
      a.parent && !ids.has(a.parent) ? tag('parent', `← ${a.parent}`, `made from ${a.parent}, not in this record`) : null,
      a.id === r.best_id ? tag('best', '★ best', 'the best candidate so far') : null,
      a.same_as ? tag('same', `same as ${a.same_as}`, `its code repeats ${a.same_as}'s (comments aside): not judged again, its verdict taken`) : null,
      a.tie_with && !a.same_as
        ? tieSaid
          ? tag('tie', `tie with ${a.tie_with} side by side`, `${versusText(v)}: ${a.tie_with} stayed best`)
          : tag('tie', `tie with ${a.tie_with}`, `faster than ${a.tie_with} on its point, but their 95 % intervals overlap: ${a.tie_with} stayed best`)
        : null,
      correct && t.noisy && !a.same_as ? tag('noisy', 'noisy', t.noise_note || 'the interval stayed wider than the goal') : null,
      t.busy && !a.same_as ? tag('busy', 'busy', t.busy_note || 'the machine was busy while timing') : null,
      pinned.has(a.id) ? tag('pinned', 'pinned', 'expanded every round') : null,
      pruned.has(a.id) ? tag('pruned', 'pruned', 'never expanded again, nor its descendants') : null,
      finished.has(a.id) ? tag('finished', 'finished', 'the analyst had nothing more for it') : null,
      a.applied ? el('span', { class: 'kforge-tree-applied', title: `the change it was asked to make: ${a.applied}` }, a.applied.slice(0, 60)) : null,
      ...steer
    );
  };

  const item = (node: TreeNode): HTMLElement => {
    const a = node.candidate;
    const li = el(
      'li',
      {
        'data-role': 'tree-node',
        role: 'treeitem',
        'data-id': a.id,
        'data-state': a.result.state,
        'data-depth': node.depth,
        'data-pinned': pinned.has(a.id),
        'data-pruned': pruned.has(a.id),
        'data-greyed': node.greyed,
        'data-finished': finished.has(a.id),
        'data-best': a.id === r.best_id,
        'aria-selected': String(a.id === options.selected)
      },
      row(node)
    );
    if (node.children.length) {
      li.appendChild(el('ul', { role: 'group', 'data-flat': node.depth + 1 >= MAX_INDENT }, ...node.children.map(item)));
    }
    return li;
  };

  return [
    options.steer
      ? el(
          'div',
          { class: 'kforge-muted kforge-tree-hint' },
          'pin: expand it every round · prune: never expand it or its descendants again'
        )
      : null,
    el('ul', { class: 'kforge-tree', role: 'tree' }, ...candidateTree(r).map(item))
  ];
}
