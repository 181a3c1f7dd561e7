/**
 * The runs drawn live in this page, so that a run's report stays live after the run ends.
 *
 * When a run ends the kernel clears the cell's live widget and shows the report (the MIME
 * bundle) in its place. That report is of a run whose kernel is still here: it must not say
 * "saved run — no kernel", and "Evaluate my edit" still judges an edit. So the widget
 * remembers its model by run id (`remember`), and the report's view (`reportView`, used by
 * index.ts) takes the model of its run where there is one: it sends through it and follows
 * its records and replies. A notebook opened from disk has no such model: a saved run.
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

const KEY = '__kforge_live_runs__';

function models(): Map<string, LiveModel> {
  const g = globalThis as unknown as Record<string, Map<string, LiveModel> | undefined>;
  const found = g[KEY] || new Map<string, LiveModel>();
  g[KEY] = found;
  return found;
}

/** The widget's model, kept under its run's id (called as the widget draws). */
export function remember(model: LiveModel): void {
  const record = model.get('record') as RunRecord | undefined;
  if (record && record.run_id) {
    models().set(record.run_id, model);
  }
}

export interface ReportView {
  view: RunView;
  /** The record the kernel displayed (a newer one from the live model wins while it has one). */
  update(record: RunRecord): void;
  dispose(): void;
}

/** The view of a run's report: live where this page drew the run live, else a saved run. */
export function reportView(parent: HTMLElement, record: RunRecord): ReportView {
  const model = record.run_id ? models().get(record.run_id) : undefined;
  const view = new RunView(parent, { renderer: 'mime', send: model ? action => model.send(action) : undefined });
  let shown = record;
  const draw = () => {
    const newer = model ? (model.get('record') as RunRecord | undefined) : undefined;
    // the widget's record once it too has the end (it also gets the edits judged after it)
    const current = newer && newer.state === 'finished' ? newer : shown;
    view.update(current, model ? (model.get('message') as string) || '' : '');
  };
  model?.on('change:record', draw);
  model?.on('change:message', draw);
  draw();
  return {
    view,
    update(next: RunRecord) {
      shown = next;
      draw();
    },
    dispose() {
      model?.off('change:record', draw);
      model?.off('change:message', draw);
      view.root.remove();
    }
  };
}
