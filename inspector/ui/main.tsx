/** The inspector's page: a thin client of the JSON API under /api/ (see inspector/server.ts). */
import { render } from 'preact'
import { useEffect, useState } from 'preact/hooks'
import { get, seg } from './api.ts'
import { ComparePage } from './compare-page.tsx'
import { FaultsPage } from './faults-page.tsx'
import { bytes, go, route, shellLine } from './format.ts'
import { LabPage } from './lab-page.tsx'
import { connectLive, onLive } from './live.ts'
import { RunPage } from './run-page.tsx'
import type { Run, RunAgainst } from './types.ts'
import { AppExit, VerdictBadge } from './verdict.tsx'

function App() {
  const [r, setR] = useState(route())
  const [connected, setConnected] = useState(false)
  useEffect(() => {
    const onHash = () => setR(route())
    addEventListener('hashchange', onHash)
    const stop = connectLive(setConnected)
    return () => {
      removeEventListener('hashchange', onHash)
      stop()
    }
  }, [])
  const [page = 'runs', ...rest] = r.parts
  return (
    <div class="app">
      <header>
        <a href="#/" class="brand">
          Tool Replay · inspector
        </a>
        <a href="#/">Runs</a>
        <a href="#/lab">Lab</a>
        <span class={connected ? 'live on' : 'live'} data-testid="live">
          {connected ? '● live' : '○ offline'}
        </span>
      </header>
      <main>
        {page === 'runs' && <RunsPage />}
        {page === 'run' && rest[0] !== undefined && (
          <RunPage key={`${rest[0]}${r.query.get('partial')}`} name={rest[0]} query={r.query} seq={rest[1] === 'x' ? Number(rest[2]) : undefined} />
        )}
        {page === 'compare' && <ComparePage key={r.query.toString()} a={r.query.get('a') ?? ''} b={r.query.get('b') ?? ''} />}
        {page === 'faults' && rest[0] !== undefined && <FaultsPage name={rest[0]} />}
        {page === 'lab' && <LabPage key={r.query.toString()} query={r.query} />}
      </main>
    </div>
  )
}

function RunsPage() {
  const [runs, setRuns] = useState<Run[] | undefined>()
  const [error, setError] = useState('')
  const [filter, setFilter] = useState('')
  const load = () =>
    get<{ runs: Run[] }>('/api/runs')
      .then(async (r) => {
        setRuns(r.runs)
        // Statistics not known yet are computed one run at a time (cached by the server).
        for (const run of r.runs.filter((x) => !x.stats).slice(0, 50)) {
          const s = await get<{ stats: Run['stats'] }>(`/api/runs/${seg(run.name)}/stats${run.status === 'complete' ? '' : '?partial=1'}`).catch(
            () => undefined,
          )
          if (s) setRuns((list) => list?.map((x) => (x.id === run.id ? { ...x, stats: s.stats } : x)))
        }
      })
      .catch((e: Error) => setError(e.message))
  useEffect(() => {
    void load()
    let last = ''
    return onLive((live) => {
      const key = JSON.stringify(live)
      if (last !== '' && key !== last) void load()
      last = key
    })
  }, [])
  if (error) return <div class="error">{error}</div>
  if (!runs) return <div class="muted">Loading runs…</div>
  const f = filter.toLowerCase()
  const shown = runs.filter(
    (r) =>
      f === '' ||
      r.name.toLowerCase().includes(f) ||
      (r.stats?.hosts ?? []).some((h) => h.includes(f)) ||
      (r.app ? shellLine(r.app.command).toLowerCase().includes(f) : false) ||
      r.status.includes(f),
  )
  return (
    <section>
      <h1>Runs</h1>
      <input
        class="filter"
        placeholder="Filter by name, host, command, status"
        value={filter}
        onInput={(e) => setFilter((e.target as HTMLInputElement).value)}
        data-testid="runs-filter"
      />
      <table class="runs">
        <thead>
          <tr>
            <th>name</th>
            <th>status</th>
            <th>exchanges</th>
            <th>model turns</th>
            <th>hosts</th>
            <th>size</th>
            <th>created</th>
            <th>lineage</th>
            <th>faults</th>
            <th>app</th>
            <th>replay verdict</th>
          </tr>
        </thead>
        <tbody>
          {shown.map((r) => (
            <tr key={r.id} data-testid="run-row" data-name={r.name}>
              <td>
                <a href={`#/run/${seg(r.name)}${r.status === 'complete' ? '' : '?partial=1'}`}>{r.name}</a>
              </td>
              <td>
                <span class={`badge ${r.status}`}>{r.status === 'recording' ? 'recording now' : r.status}</span>
              </td>
              <td>{r.exchanges}</td>
              <td>{r.stats ? r.stats.modelTurns : '…'}</td>
              <td class="hosts">{r.stats ? r.stats.hosts.join(', ') : '…'}</td>
              <td>{bytes(r.size)}</td>
              <td class="muted">{r.createdAt.replace('T', ' ').slice(0, 19)}</td>
              <td>
                {r.lineage
                  ? `fork of ${r.lineage.sourceName ?? r.lineage.sourceDigest.slice(0, 12)} (${r.lineage.patches.length} patch${r.lineage.patches.length === 1 ? '' : 'es'})`
                  : r.labels?.observedAgainst
                    ? `run against ${r.labels.observedAgainst}`
                    : ''}
              </td>
              <td>
                {r.stats && r.stats.faults > 0 ? (
                  <a href={`#/faults/${seg(r.name)}`}>
                    {r.stats.faults} ({r.stats.faultKinds.join(', ')})
                    {r.stats.contractsOk === undefined ? '' : r.stats.contractsOk ? ' · contracts ok' : ' · contract broken'}
                  </a>
                ) : (
                  ''
                )}
              </td>
              <td>
                <AppExit run={r} testId="run-app-exit" against={runsAgainst(runs, r.name)} />
              </td>
              <td>{r.stats ? <VerdictBadge v={r.stats.replay} testId="run-verdict" /> : r.labels?.observedAgainst ? '…' : ''}</td>
            </tr>
          ))}
        </tbody>
      </table>
      {runs.length === 0 && (
        <p class="muted">
          No runs yet. Record one with <code>tr-proxy record --trace NAME -- &lt;command&gt;</code>.
        </p>
      )}
      <p class="muted">
        <button type="button" class="link" onClick={() => go('/lab')}>
          Open the fault lab
        </button>
      </p>
    </section>
  )
}

/** The runs of the app against `name` in the list (recorded by this store), newest first, as the run page's head lists them. */
function runsAgainst(runs: Run[], name: string): RunAgainst[] {
  return runs
    .filter((x) => x.recorded && x.status === 'complete' && x.labels?.observedAgainst === name)
    .sort((a, b) => (a.createdAt < b.createdAt ? 1 : -1))
    .map((x) => ({ name: x.name, createdAt: x.createdAt, ...(x.app?.exit ? { exit: x.app.exit.code } : {}) }))
}

render(<App />, document.getElementById('app') as HTMLElement)
