/**
 * JupyterLab (and Notebook 7) renderer for `application/vnd.kforge.run+json`: the run record a
 * `%%kforge` cell leaves in its output when the run ends (the kernel puts it in the live
 * widget's place), drawn by the same view as the widget, with no kernel behind it: the record
 * as a saved notebook keeps it, controls off. A cell shows one view of a run at a time, so
 * nothing here looks for the widget.
 */
import { IRenderMime } from '@jupyterlab/rendermime-interfaces';
import { Widget } from '@lumino/widgets';

import { MIME_TYPE, RunRecord } from './record';
import { RunView } from './view';

export { MIME_TYPE };

export class RunRenderer extends Widget implements IRenderMime.IRenderer {
  private view: RunView | null = null;

  renderModel(model: IRenderMime.IMimeModel): Promise<void> {
    this.view = this.view || new RunView(this.node, { renderer: 'mime' });
    this.view.update(model.data[MIME_TYPE] as unknown as RunRecord);
    return Promise.resolve();
  }

  dispose(): void {
    this.view?.root.remove();
    this.view = null;
    super.dispose();
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
