/**
 * Verdicts first: a run of the app against a trace shows how the replay went (complete, misses, unused, a
 * live tail) beside what the app itself said (its exit code). An app that exits 0 after strict replay
 * refused its requests did not run against the recording: the verdict says so.
 */
import { useState } from 'preact/hooks'
import { type ApiError, post, seg } from './api.ts'
import { go } from './format.ts'
import type { ReplayVerdict, Run, RunAgainst } from './types.ts'

/** The replay verdict as a badge (nothing for a run that was not replayed against a trace). */
export function VerdictBadge({ v, testId }: { v: ReplayVerdict | undefined; testId?: string }) {
  if (!v) return null
  const cls = v.state === 'complete' ? 'badge verdict-ok' : v.state === 'live' ? 'badge verdict-live' : 'badge verdict-bad'
  return (
    <span class={cls} title={`replayed ${v.replayed} of "${v.against}"`} data-testid={testId} data-state={v.state}>
      {v.state === 'live' ? 'LIVE · ' : ''}
      {v.summary}
    </span>
  )
}

/**
 * The app's own exit code; for a run without one, what it keeps instead. `against`: the runs of the app
 * against this run, newest first (a fork that was rerun says how its newest run ended).
 */
export function AppExit({ run, testId, against = [] }: { run: Pick<Run, 'app' | 'lineage' | 'labels'>; testId?: string; against?: RunAgainst[] }) {
  const app = run.app
  if (!app) return null
  if (!app.exit) {
    const last = against[0]
    if (last)
      return (
        <span class={last.exit === 0 ? 'ok' : last.exit === undefined ? 'muted' : 'bad'} data-testid={testId && `${testId}-against`}>
          rerun{against.length > 1 ? ` ${against.length} times` : ''}: {last.exit !== undefined ? `app exit ${last.exit}` : 'no exit kept'} in {last.name}
        </span>
      )
    return (
      <span class="muted">{run.lineage ? 'command, not run against it yet' : run.labels?.testRunner ? `${run.labels.testRunner} test file` : 'command'}</span>
    )
  }
  return (
    <span class={app.exit.code === 0 ? 'ok' : 'bad'} data-testid={testId}>
      app exit {app.exit.code}
    </span>
  )
}

/**
 * On a strict run that stopped at a request its trace does not have: the two ways on. Answer it offline (a new
 * branch whose next exchange is that request with the recorded answer, to fork), or rerun with a live tail.
 */
export function NextStep({ run }: { run: Run }) {
  const v = run.stats?.replay
  const [named, setName] = useState<string | undefined>()
  const [error, setError] = useState('')
  if (!run.recorded || !v || v.firstMiss === undefined || v.live > 0) return null
  // The verdict arrives after the page: the default name follows it.
  const name = named ?? `${v.against}-next`
  const answer = () => {
    setError('')
    post<{ branch: string; seq: number }>('/api/answer', { run: run.name, to: name })
      .then((r) => go(`/run/${seg(r.branch)}/x/${r.seq}`))
      .catch((e: ApiError) => setError(`${e.code}: ${e.message}`))
  }
  return (
    <div class="needs" data-testid="next-step">
      <p>
        Strict replay stopped at <a href={`#/run/${seg(run.name)}/x/${v.firstMiss}`}>#{v.firstMiss}</a>: the app sent a request "{v.against}" does not have (the
        change you forked reached it). Two ways on:
      </p>
      <p>
        <b>Answer it offline</b>: a new branch whose #{v.firstMiss} is this request with the answer "{v.against}" recorded for the one it replaced; fork that
        answer to decide what comes next, then rerun.{' '}
        <input value={name} onInput={(e) => setName((e.target as HTMLInputElement).value)} data-testid="answer-name" />{' '}
        <button type="button" onClick={answer} data-testid="answer-submit">
          Answer #{v.firstMiss} as {name}
        </button>
      </p>
      <p>
        <b>Rerun with a live tail</b>: the real services answer from the first miss on (recorded, marked live).{' '}
        <button type="button" onClick={() => go(`/run/${seg(v.against)}?rerun=1&tail=live`)} data-testid="answer-live">
          Rerun {v.against} with a live tail
        </button>
      </p>
      {error && (
        <div class="error" data-testid="answer-error">
          {error}
        </div>
      )}
    </div>
  )
}
