/**
 * JupyterLab (and Notebook 7) renderer for `application/vnd.kforge.run+json`: the run record a
 * `%%kforge` cell leaves in its output, drawn by the same view as the live widget, without a
 * kernel (controls off, "saved run — no kernel"), or, where this page drew the run live (the
 * run's own report, shown when it ends), with the live run's kernel (live.ts).
 *
 * A cell run at a frontend holds the live widget, then this report. While the widget draws the
 * same run (or is still loading), the report stands aside, so a cell shows one view. When the
 * run ends the kernel clears the cell and shows the report alone. In a notebook saved
 * mid-run and reopened without widget state, the widget cannot be drawn ("model not found"):
 * the report shows, and style/index.css hides the widget's error.
 */
import { IRenderMime } from '@jupyterlab/rendermime-interfaces';
import { Widget } from '@lumino/widgets';

import { ReportView, reportView } from './live';
import { MIME_TYPE, RunRecord } from './record';

export { MIME_TYPE };

const LOADING = 'Loading widget...'; // what @jupyter-widgets shows until a widget is drawn
const GRACE_MS = 10_000; // how long a loading widget is waited for

export class RunRenderer extends Widget implements IRenderMime.IRenderer {
  private view: ReportView | null = null;
  private record: RunRecord | null = null;
  private observer: MutationObserver | null = null;
  private attachedAt = 0;

  renderModel(model: IRenderMime.IMimeModel): Promise<void> {
    this.record = model.data[MIME_TYPE] as unknown as RunRecord;
    this.draw();
    return Promise.resolve();
  }

  protected onAfterAttach(): void {
    this.attachedAt = Date.now();
    const area = this.node.closest('.jp-OutputArea');
    if (area && this.observer === null) {
      // changes elsewhere in the cell's outputs (the widget drawn, or failing); not our own
      this.observer = new MutationObserver(changes => {
        if (changes.some(change => !this.node.contains(change.target))) {
          this.draw();
        }
      });
      this.observer.observe(area, { childList: true, subtree: true, attributes: true, attributeFilter: ['class', 'data-state'] });
      setTimeout(() => this.draw(), GRACE_MS + 50);
    }
    this.draw();
  }

  protected onBeforeDetach(): void {
    this.observer?.disconnect();
    this.observer = null;
  }

  dispose(): void {
    this.view?.dispose();
    this.view = null;
    super.dispose();
  }

  /** Whether a live widget in this cell shows (or is about to show) this run. */
  private widgetShowsIt(): boolean {
    const area = this.node.closest('.jp-OutputArea');
    if (!area || !this.record) {
      return false;
    }
    const id = this.record.run_id;
    const live = Array.from(area.querySelectorAll('.kforge-run[data-renderer="widget"]'));
    if (live.some(root => root.getAttribute('data-run-id') === id)) {
      return true;
    }
    const loading = Array.from(area.querySelectorAll('.jp-OutputArea-output')).some(
      output =>
        output !== this.node && !output.classList.contains('lm-mod-hidden') && (output.textContent || '').trim() === LOADING
    );
    return loading && Date.now() - this.attachedAt < GRACE_MS;
  }

  private draw(): void {
    if (!this.record) {
      return;
    }
    if (this.widgetShowsIt()) {
      this.view?.dispose();
      this.view = null;
      return;
    }
    if (this.view === null) {
      this.view = reportView(this.node, this.record); // live if this page ran it (live.ts)
    } else {
      this.view.update(this.record);
    }
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
