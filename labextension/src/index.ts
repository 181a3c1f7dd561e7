/**
 * JupyterLab (and Notebook 7) renderer for `application/vnd.kforge.run+json`: the run record a
 * `%%kforge` cell keeps as its report, drawn by the same view as the live widget, without a
 * kernel (controls off, "saved run — no kernel").
 *
 * The kernel shows the report once, when the run ends, below the live widget. While the
 * widget draws the run, style/view.css hides the report; where the widget cannot be drawn (a
 * notebook opened from disk, a new kernel), the report shows and style/index.css hides the
 * widget's "model not found".
 */
import { IRenderMime } from '@jupyterlab/rendermime-interfaces';
import { Widget } from '@lumino/widgets';

import { MIME_TYPE, RunRecord } from './record';
import { RunView } from './view';

export { MIME_TYPE };

export class RunRenderer extends Widget implements IRenderMime.IRenderer {
  private readonly view = new RunView(this.node, { renderer: 'mime' });

  renderModel(model: IRenderMime.IMimeModel): Promise<void> {
    this.view.update(model.data[MIME_TYPE] as unknown as RunRecord);
    return Promise.resolve();
  }
}

export const rendererFactory: IRenderMime.IRendererFactory = {
  safe: true,
  mimeTypes: [MIME_TYPE],
  createRenderer: () => new RunRenderer()
};

const extension: IRenderMime.IExtension = {
  id: 'kforge-nb-labextension:run-report',
  rendererFactory,
  rank: 0, // preferred over the bundle's text/html fallback
  dataType: 'json'
};

export default extension;
