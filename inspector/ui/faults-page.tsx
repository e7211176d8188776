/** A faulted run's evidence: coverage per rule, what was committed, and each contract's verdict with the exchanges it points at. */
import { useEffect, useState } from 'preact/hooks'
import { get, seg } from './api.ts'

interface Evidence {
  seed?: string
  contractsFile?: string
  coverage: Array<{ rule: string; fault: string; eligible?: number; selected?: number | null; triggered: number }>
  effects: Array<{ seq: number; label: string; name: string; id: string; seenByApp: boolean; fault?: string }>
  contracts?: Array<{ contract: string; ok: boolean; summary: string; violations: Array<{ message: string; exchanges: number[] }> }>
  /** With a contracts file: whether every contract held. */
  contractsOk?: boolean
  faulted: Array<{ seq: number; rule: string; kind: string; phase: string }>
}

/** The faults page of a run. */
export function FaultsPage({ name }: { name: string }) {
  const [e, setE] = useState<Evidence | undefined>()
  const [error, setError] = useState('')
  useEffect(() => {
    get<Evidence>(`/api/runs/${seg(name)}/faults`)
      .then(setE)
      .catch((x: Error) => setError(x.message))
  }, [name])
  if (error) return <div class="error">{error}</div>
  if (!e) return <div class="muted">Loading…</div>
  return <FaultEvidence name={name} e={e} />
}

/** Coverage, commit evidence and contracts (also used by the lab page). */
export function FaultEvidence({ name, e }: { name?: string; e: Evidence }) {
  const link = (seq: number) => (name ? <a href={`#/run/${seg(name)}/x/${seq}`}>#{seq}</a> : <span>#{seq}</span>)
  return (
    <section class="faults" data-testid="faults">
      {name && <h1>Faults of {name}</h1>}
      {e.contracts && (
        <p class={e.contractsOk ? 'verdict ok' : 'verdict bad'} data-testid="faults-verdict">
          {e.contractsOk
            ? `all ${e.contracts.length} contract${e.contracts.length === 1 ? '' : 's'} held`
            : `${e.contracts.filter((c) => !c.ok).length} of ${e.contracts.length} contract${e.contracts.length === 1 ? '' : 's'} failed`}
        </p>
      )}
      {e.seed !== undefined && <p data-testid="faults-seed">faults seed {e.seed}</p>}
      <h3>Coverage</h3>
      <table data-testid="faults-coverage">
        <thead>
          <tr>
            <th>rule</th>
            <th>fault</th>
            <th>eligible</th>
            <th>selected</th>
            <th>triggered</th>
          </tr>
        </thead>
        <tbody>
          {e.coverage.map((c) => (
            <tr key={c.rule}>
              <td>{c.rule}</td>
              <td>{c.fault}</td>
              <td>{c.eligible ?? '–'}</td>
              <td>{c.selected ?? '–'}</td>
              <td>{c.triggered}</td>
            </tr>
          ))}
        </tbody>
      </table>
      <h3>Commit evidence</h3>
      {e.effects.length === 0 ? (
        <p class="muted">No effects named (a faults file's "effects" names them).</p>
      ) : (
        <ul data-testid="faults-effects">
          {e.effects.map((x, i) => (
            <li key={i}>
              {link(x.seq)} {x.label.replace(/^#\d+ /, '')}: {x.name} {x.id}{' '}
              {!x.seenByApp && <span class="bad">(the app never got the answer{x.fault ? `: fault rule ${x.fault}` : ''})</span>}
            </li>
          ))}
        </ul>
      )}
      <h3>Contracts</h3>
      {e.contracts ? (
        <ul>
          {e.contracts.map((c) => (
            <li key={c.contract} class={c.ok ? 'ok' : 'bad'} data-testid="faults-contract" data-verdict={c.ok ? 'PASS' : 'FAIL'}>
              {c.ok ? 'PASS' : 'FAIL'} {c.contract}: {c.summary}
              {c.violations.map((v, i) => (
                <div key={i} class="small">
                  {v.message}{' '}
                  {v.exchanges.map((s) => (
                    <span key={s}> {link(s)}</span>
                  ))}
                </div>
              ))}
            </li>
          ))}
        </ul>
      ) : (
        <p class="muted">No contracts checked: start the inspector with --contracts FILE (a faults file with "contracts").</p>
      )}
    </section>
  )
}
