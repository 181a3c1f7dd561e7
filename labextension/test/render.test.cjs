// Render a kforge run record (JSON file given as argv[2]) with the extension's RunView in jsdom
// and print what a person would see: the header, one line per table row, the code shown.
// Usage: npm test -- RECORD.json   (the pytest tests/test_notebook_labextension.py drives it)
const fs = require('fs');
const { JSDOM } = require('jsdom');

const dom = new JSDOM('<!doctype html><html><body></body></html>', { url: 'http://localhost/' });
for (const name of Object.getOwnPropertyNames(dom.window)) {
  if (!(name in globalThis)) {
    try {
      globalThis[name] = dom.window[name];
    } catch (err) {
      // some window getters throw outside a real page; the renderer needs none of them
    }
  }
}
globalThis.window = dom.window;
globalThis.document = dom.window.document;
// jsdom has no drag-and-drop events; @lumino/dragdrop subclasses DragEvent when it loads
globalThis.DragEvent = globalThis.DragEvent || class DragEvent extends dom.window.MouseEvent {};
globalThis.requestAnimationFrame = globalThis.requestAnimationFrame || (cb => setTimeout(cb, 0));

const extension = require('../build/test-lib/index.js');
const record = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
const factory = extension.rendererFactory;
if (!factory.mimeTypes.includes('application/vnd.kforge.run+json')) {
  throw new Error('the factory does not claim the kforge MIME type');
}
const view = factory.createRenderer({ mimeType: 'application/vnd.kforge.run+json', sanitizer: null,
                                      resolver: null, linkHandler: null, latexTypesetter: null });
view.renderModel({ data: { 'application/vnd.kforge.run+json': record }, metadata: {},
                   trusted: false, setData: () => undefined }).then(() => {
  const node = view.node;
  const rows = [...node.querySelectorAll('table.kforge-table tr')].slice(1)
    .map(tr => [...tr.querySelectorAll('td')].map(td => td.textContent).join(' | '));
  // a click on the first row shows that candidate's code
  node.querySelector('table.kforge-table tr:nth-child(2)').onclick();
  console.log(JSON.stringify({
    header: node.querySelector('.kforge-header').textContent,
    notes: [...node.querySelectorAll('.kforge-note')].map(n => n.textContent),
    rows,
    code_after_click: node.querySelector('.kforge-code-box').textContent,
    chart: node.querySelector('svg') !== null,
    scripts: node.querySelectorAll('script').length
  }));
});
