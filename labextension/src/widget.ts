/**
 * The anywidget front end of kforge_nb/ui/widget.py (`RunWidget`): the run-record view, live.
 * Bundled by esbuild into kforge_nb/ui/static/view.js, the widget's `_esm`.
 *
 * The kernel syncs `record` (and `message`, its reply to the last action); the view sends
 * actions back with model.send({action, text?, code?}). The widget is the cell's output while
 * the run goes; when it ends the kernel puts the run's report (index.ts) in its place.
 */
import { Action, RunRecord } from './record';
import { RunView } from './view';

export { RunView } from './view';

/** What anywidget hands `render`: the widget's model, as far as the view uses it. */
export interface LiveModel {
  get(name: string): unknown;
  on(event: string, callback: () => void): void;
  off(event: string, callback: () => void): void;
  send(content: Action): void;
}

export default {
  render({ model, el }: { model: LiveModel; el: HTMLElement }): () => void {
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
