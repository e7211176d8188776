/**
 * Rerun the run's recorded command in strict replay against it: one click, the command shown, its output
 * streamed; a command that came with an imported trace is shown in full and runs only once confirmed.
 */
import { useEffect, useRef, useState } from 'preact/hooks'
import { type ApiError, eventsUrl, post, seg } from './api.ts'
import { ConfirmCommand, type Unconfirmed, unconfirmed } from './confirm-command.tsx'
import { go, shellLine } from './format.ts'
import type { Run } from './types.ts'

interface Started {
  id: string
  recordAs: string
  commandLine: string
  cwd: string
}

/** The rerun panel of a run page. */
export function RerunPanel({ run }: { run: Run }) {
  const [confirm, setConfirm] = useState<Unconfirmed | undefined>()
  const [started, setStarted] = useState<Started | undefined>()
  const [output, setOutput] = useState('')
  const [exit, setExit] = useState<number | undefined>()
  const [error, setError] = useState('')
  const pre = useRef<HTMLPreElement>(null)
  const source = run.lineage?.sourceName ?? run.name
  const start = (digest?: string) => {
    setError('')
    post<Started>('/api/rerun', { trace: run.name, ...(digest ? { confirm: digest } : {}) })
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
  return (
    <div class="rerun" data-testid="rerun-panel">
      <h3>Rerun the app in strict replay against {run.name}</h3>
      <p>
        <code data-testid="rerun-command">
          {shellLine(['tr-proxy', 'replay', '--strict', '--trace', run.name, '--record-as', `${run.name}-run`, '--', ...(run.app?.command ?? [])])}
        </code>
        {run.app?.cwd && <span class="muted"> in {run.app.cwd}</span>}
      </p>
      {!started && !confirm && (
        <button type="button" onClick={() => start()} data-testid="rerun-start">
          Rerun
        </button>
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
          {exit !== undefined && (
            <p data-testid="rerun-exit">
              <span class={exit === 0 ? 'ok' : 'bad'}>exit {exit}</span>{' '}
              <button type="button" onClick={() => go(`/compare?a=${seg(source)}&b=${seg(started.recordAs)}`)} data-testid="open-compare">
                Compare {source} with {started.recordAs}
              </button>
            </p>
          )}
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
