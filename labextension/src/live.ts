/**
 * The runs drawn live in this page, so that a run's report stays live after the run ends.
 *
 * When a run ends the kernel clears the cell's live widget and shows the report (the MIME
 * bundle) in its place. That report is of a run whose kernel is still here: it must not say
 * "saved run — no kernel", and "Evaluate my edit" still judges an edit. So the widget
 * remembers its model by run id (`remember`), and the report's view (`reportView`, used by
 * index.ts) takes the model of its run where there is one: it sends through it and follows
 * its records and replies. After a page reload with the kernel alive, the widget manager takes
 * the run's model back from the kernel (anywidget's `initialize` remembers it) and the report
 * turns live then. A notebook opened from disk, or whose kernel is gone, has no such model: a
 * saved run.
 *
 * The widget's bundle (view.js) and the lab extension are separate bundles in one page: the
 * models are kept on globalThis.
 */
import { Action, RunRecord } from './record';
import { RunView } from './view';

export interface LiveModel {
  get(name: string): unknown;
  on(event: string, callback: () => void): void;
  off(event: string, callback: () => void): void;
  send(content: Action): void;
}

const KEY = '__kforge_live_runs_v2__';

interface Registry {
  models: Map<string, LiveModel>;
  /** Report views waiting for their run's model (a page reloaded while the kernel lives). */
  waiting: Map<string, Set<(model: LiveModel) => void>>;
}

function registry(): Registry {
  const g = globalThis as unknown as Record<string, Registry | undefined>;
  const found = g[KEY] || { models: new Map(), waiting: new Map() };
  g[KEY] = found;
  return found;
}

/** The widget's model, kept under its run's id: called when the model is made (anywidget's
 * `initialize`: also for the models the widget manager takes back from a live kernel after a
 * page reload, whose widget views are no longer in any cell) and as the widget draws. */
export function remember(model: LiveModel): void {
  const record = model.get('record') as RunRecord | undefined;
  if (record && record.run_id) {
    const { models, waiting } = registry();
    models.set(record.run_id, model);
    for (const connect of waiting.get(record.run_id) || []) {
      connect(model);
    }
    waiting.delete(record.run_id);
  }
}

export interface ReportView {
  view: RunView;
  /** The record the kernel displayed (a newer one from the live model wins while it has one). */
  update(record: RunRecord): void;
  dispose(): void;
}

/** The view of a run's report: live where this page has the run's model (drawn live here, or
 * taken back from the kernel after a reload: then it turns live when the model arrives), else
 * a saved run. */
export function reportView(parent: HTMLElement, record: RunRecord): ReportView {
  const { models, waiting } = registry();
  const view = new RunView(parent, { renderer: 'mime' });
  let model: LiveModel | undefined;
  let shown = record;
  const draw = () => {
    const newer = model ? (model.get('record') as RunRecord | undefined) : undefined;
    // the widget's record once it too has the end (it also gets the edits judged after it)
    const current = newer && newer.state === 'finished' ? newer : shown;
    view.update(current, model ? (model.get('message') as string) || '' : '');
  };
  const connect = (live: LiveModel) => {
    model = live;
    view.connect(action => live.send(action));
    live.on('change:record', draw);
    live.on('change:message', draw);
    draw();
  };
  const known = record.run_id ? models.get(record.run_id) : undefined;
  if (known) {
    connect(known);
  } else {
    draw();
    if (record.run_id) {
      const list = waiting.get(record.run_id) || new Set();
      list.add(connect);
      waiting.set(record.run_id, list);
    }
  }
  return {
    view,
    update(next: RunRecord) {
      shown = next;
      draw();
    },
    dispose() {
      waiting.get(record.run_id)?.delete(connect);
      model?.off('change:record', draw);
      model?.off('change:message', draw);
      view.root.remove();
    }
  };
}
