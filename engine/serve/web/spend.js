// What model calls cost, shown as the command line shows it (engine/core/usage.py: `money`, `Spend.cost_text`):
// a price that is not known is "unknown", never $0.

/** US dollars with the digits that matter for model calls (fractions of a cent are common). */
export function money(value) {
  if (value === 0) return "$0";
  if (value >= 1) return `$${value.toLocaleString("en-US", { minimumFractionDigits: 2, maximumFractionDigits: 2 })}`;
  if (value >= 0.01) return `$${value.toFixed(4)}`;
  return `$${value.toFixed(6)}`;
}

/** A total's cost from `{model_calls, cost_usd, unpriced_calls}` (a run record, a step's calls):
 * "-" without model calls, "unknown" when none had a price, ">= $x (n unpriced)" when some had none
 * (`short`: ">= $x", for a narrow column whose hover text says the rest). */
export function costText(spend, short = false) {
  const calls = Number(spend.model_calls || 0);
  const unpriced = Number(spend.unpriced_calls || 0);
  if (!calls) return "-";
  if (unpriced >= calls) return "unknown";
  const text = money(Number(spend.cost_usd || 0));
  if (!unpriced) return text;
  return short ? `>= ${text}` : `>= ${text} (${unpriced} unpriced)`;
}

/** A run record's model calls and tokens, in one line (the runs list's hover text). */
export function spendSummary(run) {
  const calls = Number(run.model_calls || 0);
  if (!calls) return "no model calls";
  const parts = [`${calls} model call${calls === 1 ? "" : "s"}`,
    `tokens ${run.input_tokens || 0} in, ${run.output_tokens || 0} out`];
  if (run.cached_tokens) parts.push(`${run.cached_tokens} cached`);
  if (run.reasoning_tokens) parts.push(`${run.reasoning_tokens} reasoning`);
  parts.push(`cost ${costText(run)}`);
  return parts.join(" · ");
}
