/**
 * The anywidget front end of kforge_nb/ui/widget.py (`RunWidget`): the run-record view, live.
 * Bundled by esbuild into kforge_nb/ui/static/view.js, the widget's `_esm`.
 *
 * The kernel syncs `record` (and `message`, its reply to the last action); the view sends
 * actions back with model.send({action, text?, code?}). The widget is the run's one live view:
 * it stays in the cell after the run ends (an edit can still be judged), and the report the
 * kernel shows below it then is hidden while it draws (style/view.css).
 */
import { Action, RunRecord } from './record';
import { RunView } from './view';

export { RunView } from './view';

interface Model {
  get(name: string): unknown;
  on(event: string, callback: () => void): void;
  off(event: string, callback: () => void): void;
  send(content: Action): void;
}

export default {
  render({ model, el }: { model: Model; el: HTMLElement }): () => void {
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
