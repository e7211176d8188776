/**
 * Rerun the run's recorded command against it: in strict replay (offline), or with a live tail (from the
 * first request no recording matches, the real services answer: recorded, marked live). The command is
 * shown, its output streamed; a command that came with an imported trace is shown in full and runs only once
 * confirmed. When it ends, the verdict (how the replay went) beside the app's exit, and the comparison.
 */
import { useEffect, useRef, useState } from 'preact/hooks'
import { type ApiError, eventsUrl, get, post, seg } from './api.ts'
import { ComparePage } from './compare-page.tsx'
import { ConfirmCommand, type Unconfirmed, unconfirmed } from './confirm-command.tsx'
import { go, shellLine } from './format.ts'
import type { Run } from './types.ts'
import { AppExit, VerdictBadge } from './verdict.tsx'

interface Started {
  id: string
  recordAs: string
  tail: 'strict' | 'live'
  commandLine: string
  cwd: string
}

/** The rerun panel of a run page; `tail` is the way the page proposes first; `onDone` once the rerun's run is stored. */
export function RerunPanel({ run, tail: proposed, onDone }: { run: Run; tail: 'strict' | 'live'; onDone?: () => void }) {
  const [tail, setTail] = useState(proposed)
  const [confirm, setConfirm] = useState<Unconfirmed | undefined>()
  const [started, setStarted] = useState<Started | undefined>()
  const [output, setOutput] = useState('')
  const [exit, setExit] = useState<number | undefined>()
  const [error, setError] = useState('')
  const pre = useRef<HTMLPreElement>(null)
  const source = run.lineage?.sourceName ?? run.name
  const start = (digest?: string) => {
    setError('')
    post<Started>('/api/rerun', { trace: run.name, tail, ...(digest ? { confirm: digest } : {}) })
      .then((r) => {
        setConfirm(undefined)
        setStarted(r)
      })
      .catch((e: ApiError) => {
        const ask = unconfirmed(e)
        if (ask) setConfirm(ask)
        else setError(`${e.code}: ${e.message}`)
      })
  }
  useEffect(() => {
    if (!started) return
    const es = new EventSource(eventsUrl(`/api/rerun/${started.id}/events`))
    es.addEventListener('output', (e) => setOutput((o) => o + (JSON.parse((e as MessageEvent).data) as { text: string }).text))
    es.addEventListener('end', (e) => {
      setExit((JSON.parse((e as MessageEvent).data) as { exitCode: number }).exitCode)
      es.close()
    })
    return () => es.close()
  }, [started?.id])
  useEffect(() => {
    if (pre.current) pre.current.scrollTop = pre.current.scrollHeight
  }, [output])
  const recordAs = `${run.name}-${tail === 'live' ? 'live' : 'run'}`
  return (
    <div class="rerun" data-testid="rerun-panel">
      <h3>
        Rerun the app against {run.name}
        {tail === 'live' ? ', with a live tail' : ' in strict replay'}
      </h3>
      <p>
        <code data-testid="rerun-command">
          {shellLine([
            'tr-proxy',
            'replay',
            '--strict',
            '--trace',
            run.name,
            '--record-as',
            recordAs,
            ...(tail === 'live' ? ['--tail', 'live'] : []),
            '--',
            ...(run.app?.command ?? []),
          ])}
        </code>
        {run.app?.cwd && <span class="muted"> in {run.app.cwd}</span>}
      </p>
      {tail === 'live' && (
        <p class="live-warning" data-testid="rerun-live-warning">
          LIVE: from the first request no recording matches, requests go to the real services (the app needs its network and keys); they are recorded in the run
          and marked live. This run is not offline.
        </p>
      )}
      {!started && !confirm && (
        <p>
          <button type="button" onClick={() => start()} data-testid="rerun-start">
            {tail === 'live' ? 'Rerun with a live tail' : 'Rerun'}
          </button>{' '}
          <button type="button" class="link" onClick={() => setTail(tail === 'live' ? 'strict' : 'live')} data-testid="rerun-switch">
            {tail === 'live' ? 'strict replay instead (offline)' : 'with a live tail instead'}
          </button>
        </p>
      )}
      {confirm && <ConfirmCommand what={confirm} onRun={(digest) => start(digest)} onCancel={() => setConfirm(undefined)} />}
      {started && (
        <>
          <p class="muted">
            running <code>{started.commandLine}</code>
          </p>
          <pre class="term" ref={pre} data-testid="rerun-output">
            {output}
          </pre>
          {exit !== undefined && <RerunResult source={source} recordAs={started.recordAs} exit={exit} onRead={onDone} />}
        </>
      )}
      {error && (
        <div class="error" data-testid="rerun-error">
          {error}
        </div>
      )}
    </div>
  )
}

/** How the rerun went: the app's exit, the replay verdict, tr-proxy's own exit, then the comparison itself. */
function RerunResult({ source, recordAs, exit, onRead }: { source: string; recordAs: string; exit: number; onRead?: (() => void) | undefined }) {
  const [run, setRun] = useState<Run | undefined>()
  useEffect(() => {
    void get<{ run: Run }>(`/api/runs/${seg(recordAs)}`)
      .then(async (r) => {
        onRead?.()
        const s = r.run.stats ?? (await get<{ stats: Run['stats'] }>(`/api/runs/${seg(recordAs)}/stats`)).stats
        setRun({ ...r.run, stats: s })
      })
      .catch(() => {})
  }, [recordAs])
  return (
    <div data-testid="rerun-result">
      <p data-testid="rerun-exit" class="facts">
        <a href={`#/run/${seg(recordAs)}`}>{recordAs}</a>
        {run && <AppExit run={run} testId="rerun-app-exit" />}
        {run && <VerdictBadge v={run.stats?.replay} testId="rerun-verdict" />}
        <span class={exit === 0 ? 'ok' : 'bad'}>
          tr-proxy exit {exit}
          {exit === 69 ? ' (strict replay incomplete)' : ''}
        </span>
        <button type="button" class="link" onClick={() => go(`/compare?a=${seg(source)}&b=${seg(recordAs)}`)} data-testid="open-compare">
          open the comparison on its own page
        </button>
      </p>
      {run && <ComparePage a={source} b={recordAs} embedded />}
    </div>
  )
}
