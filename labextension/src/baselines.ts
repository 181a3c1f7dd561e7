/**
 * What the views call the torch.compile baseline a timing was measured against: "vs compile"
 * for torch.compile's default mode, "vs max-autotune" where `--baseline max-autotune` chose it.
 * The same rule as kforge_nb/baselines.py (short_name, long_name), for the browser's views.
 */

/** A record made before the mode was recorded was timed against the default mode. */
function isDefault(mode?: string | null): boolean {
  return !mode || mode === 'default';
}

/** The baseline in a column or a compact line: "compile" or "max-autotune". */
export function shortBaseline(mode?: string | null): string {
  return isDefault(mode) ? 'compile' : (mode as string);
}

/** The baseline in a sentence: "torch.compile" or "torch.compile max-autotune". */
export function longBaseline(mode?: string | null): string {
  return isDefault(mode) ? 'torch.compile' : `torch.compile ${mode}`;
}

/** The mode of a table's timings: the first that records one (one run, one baseline). */
export function commonMode(timings: ({ compile_mode?: string | null } | undefined | null)[]): string | null {
  return timings.map(t => t?.compile_mode).find(m => m) ?? null;
}
