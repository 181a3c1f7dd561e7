"""The live notebook view of a Session (ipywidgets 8): a subscriber to its events.

    header     target, device, provider/model, iteration i/N, elapsed, tokens and cost,
               progress bar, Stop
    strip      one badge per candidate (click one to show it in the tabs)
    tabs       Code | Errors | Correctness | Profile | Performance | Recommendation

Widgets are updated from the session's thread as events arrive. Callbacks do one thing: hand a
decision to the Session (`session.accept()`, `.edit(text)`, ...) or start an evaluation of the
user's edit in a background thread, and return.
"""
from __future__ import annotations

import threading
import time

import ipywidgets as w

from . import charts, figures, html as h
from ..session.events import Event

TABS = ("Code", "Errors", "Correctness", "Profile", "Performance", "Recommendation")


class Dashboard:
    def __init__(self, session):
        self.session = session
        self.attempts: list[dict] = []            # one per `evaluated` event
        self.selected: int | None = None          # index into attempts; None follows the latest
        self.recommendation: dict | None = None
        self.pending = False                      # a recommendation waits for a decision
        self.finished = False
        self.info: dict = {}
        self.notices: list[str] = []
        self.decisions: list[str] = []
        self._lock = threading.RLock()
        self._editor_filled = ""
        self._build()
        session.subscribe(self)

    # --- layout -----------------------------------------------------------------------------
    def _build(self) -> None:
        self.title = w.HTML()
        self.stats = w.HTML()
        self.progress = w.IntProgress(value=0, min=0, max=max(1, self.session.budget.iterations),
                                      bar_style="info", layout=w.Layout(width="260px"))
        self.stop_button = w.Button(description="Stop", button_style="danger", icon="stop",
                                    tooltip="stop the session after the current step",
                                    layout=w.Layout(width="90px"))
        self.stop_button.on_click(lambda _: self.session.stop())
        self.banner = w.HTML()
        self.status = w.HTML(f'<span style="{h.FONT}">starting…</span>')
        self.strip = w.HBox(layout=w.Layout(flex_flow="row wrap"))

        self.code_view, self.diff_view = w.HTML(), w.HTML()
        self.editor = w.Textarea(placeholder="edit the candidate here, then evaluate it",
                                 layout=w.Layout(width="100%", height="260px"))
        self.evaluate_button = w.Button(description="Evaluate my edit", icon="play",
                                        button_style="primary", layout=w.Layout(width="160px"))
        self.evaluate_button.on_click(self._on_evaluate)
        self.edit_status = w.HTML()
        code_tab = w.VBox([self.code_view, w.HTML("<b>diff against the previous candidate</b>"),
                           self.diff_view, w.HTML("<b>your edit</b>"), self.editor,
                           w.HBox([self.evaluate_button, self.edit_status])])

        self.errors_view, self.correctness_view, self.error_map_view = w.HTML(), w.HTML(), w.HTML()
        self.timeline_view, self.profile_view = w.HTML(), w.HTML()
        self.speedup_view, self.roofline_view, self.iterations_view = w.HTML(), w.HTML(), w.HTML()
        # plotly FigureWidgets on request only: each carries ~5 MB of plotly.js in its state
        self.figures: dict[str, object] = {}
        self.interactive_button = w.Button(description="Interactive charts (plotly)",
                                           icon="line-chart", layout=w.Layout(width="220px"),
                                           tooltip="zoomable timeline and speedup chart; adds "
                                                   "~5 MB to a saved notebook")
        self.interactive_button.on_click(lambda _: self.show_interactive())
        self.timeline_box, self.speedup_box = w.VBox(), w.VBox()

        self.recommendation_view, self.decision_status = w.HTML(), w.HTML()
        self.edit_text = w.Textarea(placeholder="the recommendation, edited: Edit sends this",
                                    layout=w.Layout(width="100%", height="90px"))
        self.redirect_text = w.Textarea(placeholder="your own instruction: Redirect sends this",
                                        layout=w.Layout(width="100%", height="60px"))
        self.buttons = {
            "accept": w.Button(description="Accept", button_style="success", icon="check"),
            "edit": w.Button(description="Edit", button_style="info", icon="pencil"),
            "redirect": w.Button(description="Redirect", button_style="warning", icon="share"),
            "skip": w.Button(description="Skip", icon="forward"),
            "stop": w.Button(description="Stop", button_style="danger", icon="stop"),
        }
        for kind, button in self.buttons.items():
            button.on_click(self._decide(kind))
        self.decision_log = w.HTML()
        recommendation_tab = w.VBox([self.recommendation_view, self.decision_status,
                                     w.HBox(list(self.buttons.values())),
                                     w.HTML("<b>Edit</b>: change the recommendation"),
                                     self.edit_text,
                                     w.HTML("<b>Redirect</b>: ask for something else"),
                                     self.redirect_text, self.decision_log])

        self.tabs = w.Tab(children=[
            code_tab, w.VBox([self.errors_view]),
            w.VBox([self.correctness_view, self.error_map_view]),
            w.VBox([self.interactive_button, self.timeline_box, self.timeline_view,
                    self.profile_view]),
            w.VBox([self.speedup_box, self.speedup_view, self.roofline_view,
                    self.iterations_view]),
            recommendation_tab], titles=TABS)
        header = w.HBox([self.title, self.progress, self.stop_button],
                        layout=w.Layout(justify_content="space-between", align_items="center"))
        self.widget = w.VBox([header, self.stats, self.banner, self.status, self.strip,
                              self.tabs])
        self._set_decision_buttons(False)
        self._render_views()

    def _ipython_display_(self):
        from IPython.display import display
        display(self.widget)

    # --- events -----------------------------------------------------------------------------
    def __call__(self, event: Event) -> None:
        with self._lock:
            handler = getattr(self, f"_on_{event.kind}", None)
            if handler:
                handler(event.iteration, event.data)
            self._render_stats()

    def _on_started(self, i, d):
        self.info = {**d, "t0": time.monotonic()}
        self.progress.max = max(1, d["iterations"])
        model = d.get("model") or ""
        self.title.value = (f'<span style="{h.FONT}"><b>kforge</b> · {h.esc(d["problem"])} on '
                            f'<b>{h.esc(d["target"])}</b> ({h.esc(d["device"])}) · '
                            f'{h.esc(d["provider"])}{" · " + h.esc(model) if model else ""} · '
                            f'mode {h.esc(d["mode"])}</span>')
        self._render_banner()

    def _on_notice(self, i, d):
        self.notices.append(d["text"])
        self._render_banner()

    def _on_iteration_started(self, i, d):
        self.info["iteration"] = i
        self._status(f"iteration {i + 1}/{self.progress.max}: {d['phase']} pass, "
                     f"generating ({d['kind']})…")

    def _on_candidate_generated(self, i, d):
        what = "evaluating" if d.get("code") else f"no code: {d.get('failure')}"
        self._status(f"iteration {i + 1}/{self.progress.max}: candidate {i}.{d['sample']} "
                     f"{what}…")

    def _on_evaluated(self, i, d):
        attempt = {"iteration": i, "sample": d["sample"], "kind": d.get("kind", ""),
                   "code": d.get("code"), "result": d["result"]}
        self.attempts.append(attempt)
        self.progress.value = min(self.progress.max, len({a["iteration"] for a in self.attempts}))
        self._add_badge(len(self.attempts) - 1)
        r = d["result"]
        self._status(f"candidate {i}.{d['sample']}: {r['state']} "
                     f"({r['message'].splitlines()[0][:120]})")
        self._render_banner()
        self._render_views()

    def _on_recommendation(self, i, d):
        self.recommendation = d
        self.recommendation_view.value = h.recommendation(d)
        self.edit_text.value = d.get("text", "")
        if self.session.mode == "review":
            self.pending = True
            self._set_decision_buttons(True)
            self.decision_status.value = h.note("waiting for your decision: Accept, Edit, "
                                                "Redirect, Skip or Stop")
            self.tabs.selected_index = TABS.index("Recommendation")
        else:
            self.decision_status.value = (f'<span style="{h.FONT}">accepted automatically '
                                          f'(--mode auto)</span>')
        self._status(f"iteration {i + 1}: recommendation: {d['title']}")

    def _on_decision(self, i, d):
        self.pending = False
        self._set_decision_buttons(False)
        text = f" — {d['text'][:120]}" if d.get("text") else ""
        self.decisions.append(f"iteration {i}: <b>{h.esc(d['kind'])}</b>{h.esc(text)}")
        self.decision_log.value = f'<div style="{h.FONT}">' + "<br>".join(self.decisions) + "</div>"
        if self.session.mode == "review":
            self.decision_status.value = f'<span style="{h.FONT}">decided: {h.esc(d["kind"])}</span>'

    def _on_usage(self, i, d):
        self.info["usage"] = d

    def _on_finished(self, i, d):
        self.finished, self.pending = True, False
        self._set_decision_buttons(False)
        self.stop_button.disabled = True
        self.progress.value = self.progress.max
        best = d.get("best")
        self.progress.bar_style = "success" if best else "warning"
        self.info["usage"] = d.get("usage") or self.info.get("usage")
        self.info["elapsed"] = (d.get("usage") or {}).get("elapsed_s")
        self._status(f"finished: {d['reason']}; "
                     + (f"best is candidate {best['iteration']}.{best['sample']}" if best
                        else "no correct candidate") + f"; artifacts in {d['artifacts']}")

    # --- rendering --------------------------------------------------------------------------
    def _status(self, text: str) -> None:
        self.status.value = f'<span style="{h.FONT}">{h.esc(text)}</span>'

    def _render_stats(self) -> None:
        usage = self.info.get("usage") or {}
        elapsed = self.info.get("elapsed")
        if elapsed is None and "t0" in self.info:
            elapsed = time.monotonic() - self.info["t0"]
        best = self._best()
        speed = ""
        if best is not None:
            t = self.attempts[best]["result"]["timing"]
            speed = (f" · best {t.get('candidate_ms') or 0:.4g} ms"
                     + (f", {t['speedup_vs_eager']:.2f}x vs eager" if t.get("speedup_vs_eager") else "")
                     + (f", {t['speedup_vs_compile']:.2f}x vs torch.compile"
                        if t.get("speedup_vs_compile") else ""))
        self.stats.value = (
            f'<span style="{h.FONT}">iteration {min(self.info.get("iteration", 0) + 1, self.progress.max)}'
            f'/{self.progress.max} · {len(self.attempts)} candidates · elapsed {elapsed or 0:.0f} s · '
            f'tokens {usage.get("input_tokens", 0)} in / {usage.get("output_tokens", 0)} out · '
            f'${usage.get("cost_usd", 0):.4f}{speed}</span>')

    def _render_banner(self) -> None:
        notes = []
        timing_note = self.info.get("timing_note")
        unreal = [a for a in self.attempts if a["result"]["state"] == "correct"
                  and not (a["result"].get("timing") or {}).get("real", True)]
        if timing_note or unreal:
            why = timing_note or unreal[-1]["result"]["timing"].get("note") or ""
            notes.append(h.note(f"timings are NOT performance figures here: {why}"))
        notes += [h.note(n) for n in self.notices]
        self.banner.value = "".join(notes)

    def _best(self) -> int | None:
        timed = [(a["result"]["timing"].get("candidate_ms"), k) for k, a in enumerate(self.attempts)
                 if a["result"]["state"] == "correct" and a["result"]["timing"].get("candidate_ms")]
        if timed:
            return min(timed)[1]
        correct = [k for k, a in enumerate(self.attempts) if a["result"]["state"] == "correct"]
        return correct[0] if correct else None

    def _add_badge(self, k: int) -> None:
        a = self.attempts[k]
        r = a["result"]
        style = {"correct": "success", "mismatch": "warning", "compile_failure": "danger",
                 "runtime_error": "danger", "rejected": "danger"}.get(r["state"], "")
        badge = w.Button(description=f'{a["iteration"]}.{a["sample"]} {r["state"]}',
                         button_style=style, tooltip=r["message"][:300],
                         layout=w.Layout(width="auto"))
        badge.on_click(lambda _, k=k: self.select(k))
        self.strip.children = (*self.strip.children, badge)

    def select(self, k: int | None) -> None:
        """Show candidate k (None: always the latest) in the tabs."""
        with self._lock:
            self.selected = k
            self._render_views()

    def _render_views(self) -> None:
        k = self.selected if self.selected is not None else len(self.attempts) - 1
        a = self.attempts[k] if 0 <= k < len(self.attempts) else None
        previous = next((p for p in reversed(self.attempts[:k]) if p.get("code")), None) \
            if a else None
        label = f'candidate {a["iteration"]}.{a["sample"]}' if a else ""
        self.code_view.value = (f'<div style="{h.FONT}">{h.badge(a["result"]["state"])} '
                                f'{label} ({h.esc(a["kind"])})</div>' + h.code(a.get("code"))
                                if a else h.code(None))
        self.diff_view.value = h.diff(previous and previous["code"], a and a.get("code"),
                                      f'candidate {previous["iteration"]}.{previous["sample"]}'
                                      if previous else "", label)
        if a and a.get("code") and self.editor.value == self._editor_filled:
            self.editor.value = self._editor_filled = a["code"]
        self.errors_view.value = h.error(a)
        self.correctness_view.value = h.correctness(a)
        self.error_map_view.value = charts.error_map(
            (a["result"].get("correctness") or {}).get("error_map") if a else None)
        profile = (a["result"].get("profile") or {}) if a else {}
        self.timeline_view.value = charts.timeline(profile.get("reference_events"),
                                                   profile.get("candidate_events"))
        self.profile_view.value = h.profile_tables(a)
        if self.figures:
            self._render_figures(a, label)
        points = charts.performance_points(self.attempts)
        self.speedup_view.value = charts.speedups(points)
        self.roofline_view.value = charts.roofline_bars(points)
        best = self._best()
        self.iterations_view.value = h.iterations(
            self.attempts, (self.attempts[best]["iteration"], self.attempts[best]["sample"])
            if best is not None else None)

    def show_interactive(self) -> None:
        """Add zoomable plotly charts (Profile and Performance tabs), kept up to date from now."""
        missing = figures.available()
        if missing:
            self.timeline_box.children = (w.HTML(h.note(missing)),)
            return
        with self._lock:
            self.figures = {"timeline": None, "speedups": None}
            self._render_views()
            self.timeline_box.children = (self.figures["timeline"],)
            self.speedup_box.children = (self.figures["speedups"],)
            self.interactive_button.disabled = True

    def _render_figures(self, a: dict | None, label: str) -> None:
        profile = (a["result"].get("profile") or {}) if a else {}
        self.figures["timeline"] = figures.timeline(
            profile.get("reference_events"), profile.get("candidate_events"),
            f"kernel timeline: {label or 'no candidate'}", self.figures["timeline"])
        self.figures["speedups"] = figures.speedups(charts.performance_points(self.attempts),
                                                    self.figures["speedups"])

    def _set_decision_buttons(self, enabled: bool) -> None:
        review = self.session.mode == "review"
        for kind, button in self.buttons.items():
            button.disabled = not (review and enabled) and kind != "stop"
        self.buttons["stop"].disabled = self.finished

    # --- callbacks: hand the decision to the session, return ----------------------------------
    def _decide(self, kind: str):
        def handler(_button):
            try:
                if kind == "stop":
                    self.session.stop()
                elif kind == "edit":
                    self.session.edit(self.edit_text.value)
                elif kind == "redirect":
                    self.session.redirect(self.redirect_text.value)
                else:
                    getattr(self.session, kind)()
            except (ValueError, RuntimeError) as err:
                self.decision_status.value = h.note(str(err))
                return
            self.pending = False
            self._set_decision_buttons(False)
            self.decision_status.value = f'<span style="{h.FONT}">sent: {kind}</span>'
        return handler

    def _on_evaluate(self, _button) -> None:
        code = self.editor.value
        if not code.strip():
            self.edit_status.value = h.note("the editor is empty")
            return
        self.edit_status.value = f'<span style="{h.FONT}">evaluating your edit…</span>'
        threading.Thread(target=self._evaluate_edit, args=(code,), daemon=True,
                         name="kforge-edit").start()

    def _evaluate_edit(self, code: str) -> None:
        attempt = self.session.evaluate_code(code, label="manual")
        self._editor_filled = self.editor.value          # keep the user's text in the editor
        self.edit_status.value = (f'<span style="{h.FONT}">your edit: '
                                  f'{h.badge(attempt.result.state)} '
                                  f'{h.esc(attempt.result.message.splitlines()[0][:200])}</span>')
