// Draws run records with the committed bundle (kforge_nb/ui/static/view.js) in jsdom, acts on
// the view as a person would, and prints what it shows and what it sent to the kernel.
//
//   node test/render.mjs SCENARIO.json
//
// SCENARIO: {"renderer": "widget" | "mime", "record": {...}, "steps": [STEP, ...]}; a STEP is
// {"click": SELECTOR} | {"fill": SELECTOR, "value": TEXT} | {"record": {...}} (the kernel
// syncs a new record) | {"message": TEXT} | {"report": {...}} (the run ended: the kernel puts
// the report in the widget's place, drawn as index.ts draws it) | {"snapshot": NAME}. A snapshot's "tree" lists the
// candidates tree's nodes (the node each is nested in, flags, tags, row text, Pin / Prune buttons). "widget" renders through the
// anywidget entry (default export, with a model that records model.send); "mime" through
// RunView as JupyterLab's renderer does (index.ts). Needs jsdom (`npm ci` in labextension/).
// tests/test_notebook_labextension.py runs it on records of real sessions.
import { readFileSync } from 'fs';
import { dirname, join } from 'path';
import { fileURLToPath, pathToFileURL } from 'url';
import { JSDOM } from 'jsdom';

const here = dirname(fileURLToPath(import.meta.url));
const bundle = process.env.KFORGE_VIEW_BUNDLE || join(here, '..', '..', 'kforge_nb', 'ui', 'static', 'view.js');
const scenario = JSON.parse(readFileSync(process.argv[2], 'utf8'));

const dom = new JSDOM('<!doctype html><html><body></body></html>', { url: 'http://localhost/' });
globalThis.window = dom.window;
globalThis.document = dom.window.document;
const view = await import(pathToFileURL(bundle).href);

const sent = [];
const listeners = {};
const state = { record: scenario.record, message: '' };
const model = {
  get: name => state[name],
  on: (event, callback) => (listeners[event] = listeners[event] || []).push(callback),
  off: (event, callback) => (listeners[event] = (listeners[event] || []).filter(c => c !== callback)),
  send: content => sent.push(content)
};
function set(name, value) {
  state[name] = value;
  for (const callback of listeners[`change:${name}`] || []) {
    callback();
  }
}

const host = document.createElement('div');
document.body.appendChild(host);
// the report as index.ts's renderer draws it: the record, no kernel behind it
function report(record) {
  const shown = new view.RunView(host, { renderer: 'mime' });
  shown.update(record);
  return shown;
}

let mime = null;
let cleanup = null;
if (scenario.renderer === 'mime') {
  mime = report(scenario.record);
} else {
  cleanup = view.default.render({ model, el: host });
}

function snapshot() {
  const root = document.querySelector('div.kforge-run');
  const q = selector => root.querySelector(selector);
  const qa = selector => [...root.querySelectorAll(selector)];
  const handlers = [...document.querySelectorAll('*')].filter(node =>
    [...node.attributes].some(attribute => attribute.name.toLowerCase().startsWith('on'))).length;
  return {
    renderer: root.getAttribute('data-renderer'),
    state: root.getAttribute('data-state'),
    roots: document.querySelectorAll('div.kforge-run').length,
    header: q('[data-role=header]').textContent,
    stop: q('[data-role=header] button[data-action=stop]')
      ? { disabled: q('[data-role=header] button[data-action=stop]').disabled } : null,
    status: q('[data-role=status]').textContent,
    notes: qa('.kforge-note, .kforge-notice').map(n => n.textContent),
    candidates: qa('[data-role=candidate]').map(c => c.getAttribute('data-id')),
    chips: qa('[data-role=candidate]').map(c => c.textContent),
    // the speedup chart's 95 % intervals ("eager:ID"), and the roofline rows drawn capped
    errorbars: qa('.kforge-errorbar').map(g => `${g.getAttribute('data-series')}:${g.getAttribute('data-id')}`),
    ceilings: qa('.kforge-bar[data-ceiling=underestimated]').map(b => `${b.closest('[data-id]')?.getAttribute('data-id')}:${b.style.width}`),
    selected: q('[data-role=candidate][aria-pressed=true]')?.getAttribute('data-id') ?? null,
    tabs: qa('button[data-tab]').map(b => b.getAttribute('data-tab')),
    tab: q('button[data-tab][aria-selected=true]').getAttribute('data-tab'),
    shown: qa('[data-pane]').filter(p => !p.hidden).map(p => p.getAttribute('data-pane')),
    panes: Object.fromEntries(qa('[data-pane]').map(p => [p.getAttribute('data-pane'), p.textContent])),
    buttons: Object.fromEntries(qa('button[data-action]').map(b => [b.getAttribute('data-action'), { disabled: b.disabled }])),
    inputs: Object.fromEntries(qa('textarea[data-input]').map(t => [t.getAttribute('data-input'), { value: t.value, readOnly: t.readOnly }])),
    charts: qa('[data-chart]').map(c => c.getAttribute('data-chart')),
    marked: qa('.kforge-line[data-mark]').map(l => l.textContent),
    rows: qa('[data-role=candidate-row]').map(tr => [...tr.children].map(td => td.textContent).join(' | ')),
    treeTitle: q('[data-role=tree] > summary')?.textContent ?? null,
    // the candidates tree: each node with the node it is nested in, its flags, its row's text
    // and its steering buttons
    tree: qa('[data-role=tree-node]').map(li => ({
      id: li.getAttribute('data-id'),
      parent: li.parentElement.closest('[data-role=tree-node]')?.getAttribute('data-id') ?? null,
      state: li.getAttribute('data-state'),
      flags: ['pinned', 'pruned', 'greyed', 'finished', 'best'].filter(f => li.hasAttribute(`data-${f}`)),
      tags: Object.fromEntries([...li.querySelector(':scope > .kforge-tree-row').querySelectorAll('[data-tag]')]
        .map(t => [t.getAttribute('data-tag'), t.textContent])),
      row: li.querySelector(':scope > .kforge-tree-row').textContent,
      steer: [...li.querySelectorAll(':scope > .kforge-tree-row > button[data-steer]')]
        .map(b => `${b.getAttribute('data-steer')}${b.disabled ? ' (disabled)' : ''}`)
    })),
    scripts: document.querySelectorAll('script').length,
    images: document.querySelectorAll('img').length,
    handlers,
    sent: [...sent]
  };
}

const snapshots = {};
for (const step of scenario.steps || [{ snapshot: 'end' }]) {
  if (step.click) {
    const node = document.querySelector(step.click);
    if (!node) {
      throw new Error(`nothing matches ${step.click}`);
    }
    node.click();
  } else if (step.fill) {
    document.querySelector(step.fill).value = step.value;
  } else if (step.report) {
    cleanup?.(); // the kernel's update_display_data: the widget's view goes
    cleanup = null;
    mime = report(step.report);
  } else if (step.record) {
    if (mime && scenario.renderer === 'mime') {
      mime.update(step.record);
    } else {
      set('record', step.record);
    }
  } else if (step.message !== undefined) {
    set('message', step.message);
  } else if (step.snapshot) {
    snapshots[step.snapshot] = snapshot();
  }
}
console.log(JSON.stringify(snapshots));
