/**
 * DOM building without HTML parsing: elements, attributes and text nodes only. Nothing that
 * comes from a run record ever reaches innerHTML, so a kernel's code is shown, never run.
 */
export type Child = Node | string | null | undefined | false;
export type Attrs = { [name: string]: string | number | boolean | null | undefined };

function fill<E extends Element>(node: E, attrs: Attrs | undefined, children: Child[]): E {
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) {
      continue;
    }
    node.setAttribute(name, value === true ? '' : String(value));
  }
  for (const child of children) {
    if (child === null || child === undefined || child === false) {
      continue;
    }
    node.appendChild(typeof child === 'string' ? document.createTextNode(child) : child);
  }
  return node;
}

export function el<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  attrs?: Attrs,
  ...children: Child[]
): HTMLElementTagNameMap[K] {
  return fill(document.createElement(tag), attrs, children);
}

const SVG_NS = 'http://www.w3.org/2000/svg';

export function svg(tag: string, attrs?: Attrs, ...children: Child[]): SVGElement {
  return fill(document.createElementNS(SVG_NS, tag) as SVGElement, attrs, children);
}

/** Replace a node's children. */
export function replace(node: Element, ...children: Child[]): void {
  node.textContent = '';
  fill(node, undefined, children);
}

export function badge(state: string): HTMLElement {
  return el('span', { class: 'kforge-badge', 'data-state': state }, state);
}

export function muted(text: string): HTMLElement {
  return el('div', { class: 'kforge-muted' }, text);
}

export function table(header: string[], rows: Child[][], attrs?: Attrs): HTMLTableElement {
  return el(
    'table',
    { class: 'kforge-table', ...attrs },
    el('thead', undefined, el('tr', undefined, ...header.map(h => el('th', undefined, h)))),
    el('tbody', undefined, ...rows.map(cells => el('tr', undefined, ...cells.map(c => el('td', undefined, c)))))
  );
}

/** Source code, one span per line (numbered by CSS), `mark` lines highlighted. */
export function codeBlock(code: string | null | undefined, mark?: number | null): HTMLElement {
  if (!code) {
    return muted('(no code)');
  }
  const lines = code.replace(/\n$/, '').split('\n');
  return el(
    'pre',
    { class: 'kforge-code' },
    ...lines.map((line, i) =>
      el('span', { class: 'kforge-line', 'data-line': i + 1, 'data-mark': mark === i + 1 }, line + '\n')
    )
  );
}
