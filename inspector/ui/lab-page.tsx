/**
 * The fault lab: the bundled `demo` scenarios with editable seed, probability and call budget. The settings
 * live in the page's URL, so a link reproduces the run; each policy's trace downloads as a trace file.
 */
import { useEffect, useState } from 'preact/hooks'
import { type ApiError, post, TOKEN } from './api.ts'
import { FaultEvidence } from './faults-page.tsx'
import { go } from './format.ts'

const SCENARIOS = ['lost_ack', 'rate_limit', 'schema_drift', 'timeout', 'latency', 'blackout', 'stream_cut']

interface LabResult {
  id: string
  command: string
  scenario: string
  story: string
  seed: string
  rerun: string
  policies: Array<{
    policy: string
    label: string
    verdict: 'PASS' | 'FAIL'
    calls: number
    shipments: number
    summary: string
    problems: string[]
    contracts: Array<{ contract: string; ok: boolean; summary: string; violations: Array<{ message: string; exchanges: number[] }> }>
    coverage: Array<{ rule: string; fault: string; eligible: number; selected: number | null; triggered: number }>
  }>
}

/** The one problem that means the run tested nothing: its fault never fired (all-rules-fired). */
const NEVER_FIRED = 'the fault never fired'

/**
 * What the page calls a policy's run: PASS, FAIL, or UNTESTED when the only problem is that the fault never
 * fired (the run says nothing about the policy; `tr-proxy demo` counts it as FAIL, for all-rules-fired).
 */
function shownVerdict(p: LabResult['policies'][number]): 'PASS' | 'FAIL' | 'UNTESTED' {
  if (p.verdict === 'FAIL' && p.problems.length > 0 && p.problems.every((x) => x === NEVER_FIRED)) return 'UNTESTED'
  return p.verdict
}

const plural = (n: number, word: string) => `${n} ${word}${n === 1 ? '' : 's'}`

/** The lab page; `query` is the URL's settings. */
export function LabPage({ query }: { query: URLSearchParams }) {
  const [form, setForm] = useState({
    scenario: query.get('scenario') ?? 'lost_ack',
    policy: query.get('policy') ?? 'all',
    seed: query.get('seed') ?? '',
    probability: query.get('probability') ?? '',
    callBudget: query.get('callBudget') ?? '',
  })
  const [result, setResult] = useState<LabResult | undefined>()
  const [error, setError] = useState('')
  const [busy, setBusy] = useState(false)
  const ran = query.get('scenario') !== null
  useEffect(() => {
    if (!ran) return
    setBusy(true)
    post<LabResult>('/api/lab', {
      scenario: form.scenario,
      policy: form.policy,
      ...(form.seed !== '' ? { seed: form.seed } : {}),
      ...(form.probability !== '' ? { probability: Number(form.probability) } : {}),
      ...(form.callBudget !== '' ? { callBudget: Number(form.callBudget) } : {}),
    })
      .then(setResult)
      .catch((e: ApiError) => setError(`${e.code}: ${e.message}`))
      .finally(() => setBusy(false))
  }, [])
  const submit = (e: Event) => {
    e.preventDefault()
    const q = new URLSearchParams(Object.entries(form).filter(([, v]) => v !== ''))
    go(`/lab?${q.toString()}`)
  }
  const field = (k: keyof typeof form, label: string, placeholder = '') => (
    <label>
      {label}
      <input
        value={form[k]}
        placeholder={placeholder}
        onInput={(e) => setForm({ ...form, [k]: (e.target as HTMLInputElement).value })}
        data-testid={`lab-${k}`}
      />
    </label>
  )
  return (
    <section class="lab">
      <h1>Fault lab</h1>
      <form onSubmit={submit} class="labform">
        <label>
          scenario
          <select value={form.scenario} onChange={(e) => setForm({ ...form, scenario: (e.target as HTMLSelectElement).value })} data-testid="lab-scenario">
            {SCENARIOS.map((s) => (
              <option key={s} value={s}>
                {s}
              </option>
            ))}
          </select>
        </label>
        {field('policy', 'policy', 'all')}
        {field('seed', 'seed', '42')}
        {field('probability', 'probability (0-1)', "the scenario's schedule")}
        {field('callBudget', 'call budget', 'none')}
        <button type="submit" data-testid="lab-run">
          Run
        </button>
      </form>
      {busy && <p class="muted">Running the lab…</p>}
      {error && <div class="error">{error}</div>}
      {result && (
        <div data-testid="lab-results">
          <p>
            {result.scenario}: {result.story} · seed {result.seed}
          </p>
          <p class="muted">
            same run from a terminal: <code data-testid="lab-command">{result.command}</code>
          </p>
          <table>
            <tbody>
              {result.policies.map((p) => {
                const v = shownVerdict(p)
                return (
                  <tr key={p.policy} data-testid="lab-result" data-verdict={v}>
                    <td
                      class={v === 'PASS' ? 'ok' : v === 'FAIL' ? 'bad' : 'untested'}
                      title={v === 'UNTESTED' ? 'the fault never fired: this run does not test the policy' : undefined}
                    >
                      {v}
                    </td>
                    <td>{p.label}</td>
                    <td>{plural(p.calls, 'call')}</td>
                    <td>{plural(p.shipments, 'shipment')}</td>
                    <td>{v === 'UNTESTED' ? `${p.summary}: this run does not test the policy` : p.summary}</td>
                    <td>
                      <a href={`/api/lab/${result.id}/${p.policy}.trace.json?token=${encodeURIComponent(TOKEN)}`} download data-testid="lab-export">
                        trace file
                      </a>
                    </td>
                  </tr>
                )
              })}
            </tbody>
          </table>
          {result.policies.map((p) => (
            <details key={p.policy}>
              <summary>{p.label}: coverage and contracts</summary>
              <FaultEvidence e={{ coverage: p.coverage, effects: [], contracts: p.contracts, faulted: [] }} />
            </details>
          ))}
        </div>
      )}
    </section>
  )
}
