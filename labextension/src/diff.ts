/**
 * A line diff of two candidates (longest common subsequence), shown as unified hunks with two
 * lines of context. Changed lines wrap (style/view.css), so a long one (the builtin agent's
 * `# kforge-builtin:` options line) shows whole, and a line changed into one other line has the
 * part that changed marked.
 */
import { el, muted } from './dom';

type Op = ' ' | '-' | '+';

export function lineDiff(a: string[], b: string[]): [Op, string][] | null {
  const n = a.length;
  const m = b.length;
  if (n * m > 4_000_000) {
    return null; // too large to diff here
  }
  const lcs = new Uint32Array((n + 1) * (m + 1));
  for (let i = n - 1; i >= 0; i--) {
    for (let j = m - 1; j >= 0; j--) {
      lcs[i * (m + 1) + j] =
        a[i] === b[j] ? lcs[(i + 1) * (m + 1) + j + 1] + 1 : Math.max(lcs[(i + 1) * (m + 1) + j], lcs[i * (m + 1) + j + 1]);
    }
  }
  const out: [Op, string][] = [];
  let i = 0;
  let j = 0;
  while (i < n || j < m) {
    if (i < n && j < m && a[i] === b[j]) {
      out.push([' ', a[i++]]);
      j++;
    } else if (i < n && (j === m || lcs[(i + 1) * (m + 1) + j] >= lcs[i * (m + 1) + j + 1])) {
      out.push(['-', a[i++]]); // removals before additions, as in a unified diff
    } else {
      out.push(['+', b[j++]]);
    }
  }
  return out;
}

export function diffView(previous: string | null, current: string | null, previousLabel: string): Element {
  if (!previous || !current) {
    return muted('(nothing to compare with)');
  }
  const lines = lineDiff(previous.split('\n'), current.split('\n'));
  if (lines === null) {
    return muted('(too large to diff here)');
  }
  const changed = lines.map(([op]) => op !== ' ');
  if (!changed.includes(true)) {
    return muted(`identical to candidate ${previousLabel}`);
  }
  const near = (k: number) => changed.slice(Math.max(0, k - 2), k + 3).includes(true);
  const added = lines.filter(([op]) => op === '+').length;
  const removed = lines.filter(([op]) => op === '-').length;
  const body = el('pre', { class: 'kforge-diff' });
  let skipped = false;
  lines.forEach(([op, text], k) => {
    if (!near(k)) {
      skipped = true;
      return;
    }
    if (skipped) {
      body.appendChild(el('span', { class: 'kforge-diff-line', 'data-op': '@' }, '…\n'));
      skipped = false;
    }
    const other = op === '-' ? lines[k + 1] : op === '+' ? lines[k - 1] : undefined;
    const paired = other && other[0] === (op === '-' ? '+' : '-') && lines[k + (op === '-' ? 2 : -2)]?.[0] !== op ? other[1] : null;
    body.appendChild(el('span', { class: 'kforge-diff-line', 'data-op': op }, `${op} `, ...changedPart(text, paired), '\n'));
  });
  return el('div', undefined, el('div', undefined, `+${added} / -${removed} lines vs candidate ${previousLabel}`), body);
}

/** `text` with the part that differs from `paired` (the line it replaced, or that replaced it)
 * in a <mark>; the text alone where there is no such line. */
function changedPart(text: string, paired: string | null): (string | HTMLElement)[] {
  if (paired === null) {
    return [text];
  }
  let start = 0;
  while (start < text.length && start < paired.length && text[start] === paired[start]) {
    start++;
  }
  let end = 0;
  while (end < text.length - start && end < paired.length - start && text[text.length - 1 - end] === paired[paired.length - 1 - end]) {
    end++;
  }
  const middle = text.slice(start, text.length - end);
  return middle ? [text.slice(0, start), el('mark', { class: 'kforge-diff-change' }, middle), text.slice(text.length - end)] : [text];
}
