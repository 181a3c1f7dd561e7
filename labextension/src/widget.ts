/**
 * The anywidget front end of kforge_nb/ui/widget.py (`RunWidget`): the run-record view, live.
 * Bundled by esbuild into kforge_nb/ui/static/view.js, the widget's `_esm`.
 *
 * The kernel syncs `record` (and `message`, its reply to the last action); the view sends
 * actions back with model.send({action, text?, code?}). The model outlives the widget's view
 * (the kernel clears the cell when the run ends): the run's report keeps using it (live.ts).
 */
import { LiveModel, remember } from './live';
import { RunRecord } from './record';
import { RunView } from './view';

export { RunView } from './view';
export { reportView } from './live';

export default {
  /** The model is made: remembered by run id even where no view of it is drawn (a page
   * reloaded while its kernel lives), so the run's report turns live (live.ts). */
  initialize({ model }: { model: LiveModel }): void {
    remember(model);
  },
  render({ model, el }: { model: LiveModel; el: HTMLElement }): () => void {
    remember(model); // the run's report, shown when the run ends, stays live (live.ts)
    const view = new RunView(el, { renderer: 'widget', send: action => model.send(action) });
    const draw = () => view.update(model.get('record') as RunRecord, (model.get('message') as string) || '');
    draw();
    model.on('change:record', draw);
    model.on('change:message', draw);
    return () => {
      model.off('change:record', draw);
      model.off('change:message', draw);
      view.root.remove();
    };
  }
};
