/**
 * Two runs side by side, aligned as `tr-proxy diff` aligns them, in model terms by default: the first
 * divergence highlighted and scrolled to, the patch that caused a difference named, a line diff of the first
 * divergence, and the two apps' outcomes at the bottom. From here a rerun is promoted to a test.
 */
import { diffLines } from 'diff'
import { useEffect, useRef, useState } from 'preact/hooks'
import { type ApiError, get, post, seg } from './api.ts'
import { ConfirmCommand, type Unconfirmed, unconfirmed } from './confirm-command.tsx'
import { Outcome } from './outcome.tsx'
import type { AppRun } from './types.ts'

interface Difference {
  kind: string
  summary: string
  a?: number
  b?: number
  attribution?: Array<{ trace: string; seq: number; patchId: string; spec?: string }>
  llm?: Array<{ what: string; before?: unknown; after?: unknown }>
  details: Array<{ side: string; field: string; path?: string; before?: unknown; after?: unknown }>
}
interface Side {
  name: string
  exchanges: number
  app?: AppRun
  lineage?: { sourceName?: string }
  /** For a run of the app against a trace (replay --record-as): that trace. */
  observedAgainst?: string
}
interface Compared {
  view: string
  a: Side
  b: Side
  diff: { equal: boolean; first?: Difference; differences: Difference[]; counts: Record<string, number> }
  pairs: Array<{ a?: number; b?: number; lineA?: string; lineB?: string; differences: number[] }>
  firstPair: number
  firstViews?: { a: string; b: string }
  command: string
  /** What "Promote to test" promotes (decided by the server), when b can be promoted. */
  promote?: { trace: string; expectFrom?: string }
  /** Why b, a run against a trace, cannot be promoted: its replay verdict. */
  promoteBlocked?: string
}

/** The comparison page; `embedded` under a rerun's output (no scrolling to the first divergence). */
export function ComparePage({ a, b, embedded = false }: { a: string; b: string; embedded?: boolean }) {
  const [c, setC] = useState<Compared | undefined>()
  const [error, setError] = useState('')
  const first = useRef<HTMLTableRowElement>(null)
  useEffect(() => {
    get<Compared & { ok: true }>(`/api/diff?a=${seg(a)}&b=${seg(b)}`)
      .then(setC)
      .catch((e: Error) => setError(e.message))
  }, [a, b])
  useEffect(() => {
    if (!embedded) first.current?.scrollIntoView({ block: 'center' })
  }, [c])
  if (error) return <div class="error">{error}</div>
  if (!c)
    return (
      <div class="muted">
        Comparing {a} and {b}…
      </div>
    )
  const f = c.diff.first
  return (
    <section class="compare">
      <h1>
        {c.a.name} → {c.b.name}
      </h1>
      <p class="muted">
        <code>{c.command}</code> · {c.view === 'llm' ? 'model terms' : 'HTTP'} · {c.diff.differences.length} difference
        {c.diff.differences.length === 1 ? '' : 's'}
      </p>
      {f ? (
        <div class="first" data-testid="first-divergence">
          <b>First divergence:</b> {f.summary}
          {f.attribution?.map((at) => (
            <div key={at.patchId} data-testid="attribution">
              caused by patch <code>{at.patchId}</code> on {at.trace} #{at.seq}
              {at.spec ? <code> {at.spec}</code> : ''}
            </div>
          ))}
        </div>
      ) : (
        <div class="first ok" data-testid="first-divergence">
          No differences{c.view === 'llm' ? ' in model terms' : ''}.
        </div>
      )}
      <table class="pairs" data-testid="pairs">
        <thead>
          <tr>
            <th>{c.a.name}</th>
            <th>{c.b.name}</th>
          </tr>
        </thead>
        <tbody>
          {c.pairs.map((p, i) => (
            <tr
              key={i}
              ref={i === c.firstPair ? first : undefined}
              class={i === c.firstPair ? 'firstpair' : p.differences.length > 0 ? 'differs' : ''}
              data-testid={i === c.firstPair ? 'first-pair' : undefined}
            >
              <td>{p.lineA ?? <span class="muted">(missing)</span>}</td>
              <td>
                {p.lineB ?? <span class="muted">(missing)</span>}
                {p.differences.map((d) => (
                  <div key={d} class="diffnote">
                    {c.diff.differences[d]?.summary}
                  </div>
                ))}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      {c.firstViews && <LineDiff a={c.firstViews.a} b={c.firstViews.b} />}
      <h2>How the app reacted</h2>
      <div class="outcomes">
        <div>
          <h3>{c.a.name}</h3>
          <Outcome app={c.a.app} testId="outcome-a" />
        </div>
        <div>
          <h3>{c.b.name}</h3>
          <Outcome app={c.b.app} testId="outcome-b" />
        </div>
      </div>
      <Promote c={c} />
    </section>
  )
}

function LineDiff({ a, b }: { a: string; b: string }) {
  return (
    <pre class="linediff" data-testid="line-diff">
      {diffLines(a, b).map((part, i) => (
        <span key={i} class={part.added ? 'add' : part.removed ? 'del' : ''}>
          {part.value
            .replace(/\n$/, '')
            .split('\n')
            .map((l) => `${part.added ? '+ ' : part.removed ? '- ' : '  '}${l}\n`)
            .join('')}
        </span>
      ))}
    </pre>
  )
}

/** Promote the branch the rerun replayed to a test that expects the rerun's outcome. */
function Promote({ c }: { c: Compared }) {
  const [name, setName] = useState(`${c.b.name}-case`)
  const [done, setDone] = useState<{ dir: string; verifyCommand: string; command: string } | undefined>()
  const [error, setError] = useState('')
  const [busy, setBusy] = useState(false)
  const [confirm, setConfirm] = useState<Unconfirmed | undefined>()
  const target = c.promote
  if (c.promoteBlocked)
    return (
      <div class="promote" data-testid="promote-blocked">
        <h2>Promote to a test</h2>
        <p>
          Not offered: {c.b.name}'s {c.promoteBlocked}. A case replays strictly and needs every request replayed and every recording used: fork what the app now
          asks for too, or rerun with a live tail and fork that run, then rerun.
        </p>
      </div>
    )
  if (!target || !c.b.app?.exit) return null
  const promote = (digest?: string) => {
    setBusy(true)
    setError('')
    setConfirm(undefined)
    post<{ dir: string; verifyCommand: string; command: string }>('/api/emit', { ...target, name, ...(digest ? { confirm: digest } : {}) })
      .then(setDone)
      .catch((e: ApiError) => {
        const ask = unconfirmed(e)
        if (ask) setConfirm(ask)
        else setError(`${e.code}: ${e.message}`)
      })
      .finally(() => setBusy(false))
  }
  return (
    <div class="promote">
      <h2>Promote to a test</h2>
      <p class="muted">
        A case that replays {target.trace} strictly and expects exit {c.b.app.exit.code} and this stdout.
      </p>
      <input value={name} onInput={(e) => setName((e.target as HTMLInputElement).value)} data-testid="promote-name" />
      <button type="button" onClick={() => promote()} disabled={busy} data-testid="promote-submit">
        {busy ? 'Emitting and verifying…' : 'Promote to test'}
      </button>
      {confirm && <ConfirmCommand what={confirm} onRun={promote} onCancel={() => setConfirm(undefined)} />}
      {done && (
        <div data-testid="promote-result">
          <p>
            Case written to <code data-testid="promote-dir">{done.dir}</code> (verified).
          </p>
          <p>
            Verify it with <code data-testid="promote-verify">{done.verifyCommand}</code>
          </p>
        </div>
      )}
      {error && (
        <div class="error" data-testid="promote-error">
          {error}
        </div>
      )}
    </div>
  )
}
