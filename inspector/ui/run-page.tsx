/** A run: its head, the timeline of its exchanges (virtualised, loaded a page at a time), one exchange in full, fork and rerun. */
import { useCallback, useEffect, useMemo, useRef, useState } from 'preact/hooks'
import { get, seg } from './api.ts'
import { ExchangePanel } from './exchange-panel.tsx'
import { bytes, clip, go, ms, shortUrl } from './format.ts'
import { onLive } from './live.ts'
import { Outcome } from './outcome.tsx'
import { RerunPanel } from './rerun-panel.tsx'
import { groupRows } from './timeline-groups.ts'
import type { Row, Run, RunAgainst } from './types.ts'
import { AppExit, NextStep, VerdictBadge } from './verdict.tsx'
import { VirtualList } from './virtual-list.tsx'

const PAGE = 200

/** The run page. */
export function RunPage({ name, query, seq }: { name: string; query: URLSearchParams; seq: number | undefined }) {
  const partial = query.get('partial') === '1'
  const q = partial ? '?partial=1' : ''
  const [run, setRun] = useState<Run | undefined>()
  const [against, setAgainst] = useState<RunAgainst[]>([])
  const [error, setError] = useState('')
  const [rows, setRows] = useState<Array<Row | undefined>>([])
  const [count, setCount] = useState(0)
  const loading = useRef(new Set<number>())
  const base = `/api/runs/${seg(name)}`
  const loadPage = useCallback(
    async (page: number, force = false) => {
      if (loading.current.has(page) && !force) return
      loading.current.add(page)
      const r = await get<{ count: number; rows: Row[] }>(`${base}/timeline?from=${page * PAGE}&limit=${PAGE}${partial ? '&partial=1' : ''}`)
      setCount(r.count)
      setRows((old) => {
        const next = old.slice()
        for (const row of r.rows) next[row.seq] = row
        return next
      })
    },
    [base, partial],
  )
  const loadHead = () =>
    get<{ run: Run; runsAgainst: RunAgainst[] }>(`${base}${q}`)
      .then((r) => {
        setRun(r.run)
        setAgainst(r.runsAgainst)
        setCount(r.run.exchanges)
        // Statistics read every exchange: they come after the page is up.
        if (!r.run.stats) void get<{ stats: Run['stats'] }>(`${base}/stats${q}`).then((s) => setRun((old) => old && { ...old, stats: s.stats }))
      })
      .catch((e: Error) => setError(e.message))
  useEffect(() => {
    void loadHead()
    void loadPage(0).catch((e: Error) => setError(e.message))
  }, [name, partial])
  // Live: a recording that grows shows its new exchanges within a poll of the store (a complete run never changes).
  useEffect(
    () =>
      onLive((live) => {
        if (!partial) return
        const mine = live.find((l) => l.name === name && l.status !== 'complete')
        if (!mine) {
          if (partial && live.some((l) => l.name === name && l.status === 'complete')) go(`/run/${seg(name)}`)
          return
        }
        setCount((c) => {
          if (mine.exchanges !== c) {
            void loadPage(Math.floor(Math.max(0, c - 1) / PAGE), true)
            if (Math.floor((mine.exchanges - 1) / PAGE) !== Math.floor(Math.max(0, c - 1) / PAGE)) void loadPage(Math.floor((mine.exchanges - 1) / PAGE), true)
          }
          return mine.exchanges
        })
      }),
    [name, partial],
  )
  // Recomputed when rows arrive, not on every render (a click on a row must not walk 10,000 of them).
  const groups = useMemo(() => groupRows(rows.slice(0, count)), [rows, count])
  const loadedEnd = useMemo(() => rows.reduce((m, r) => (r ? Math.max(m, r.startMs + r.bodyMs) : m), 1), [rows])
  if (error)
    return (
      <div class="error" data-testid="error">
        {error}
      </div>
    )
  if (!run) return <div class="muted">Loading {name}…</div>
  const duration = Math.max(run.stats?.durationMs ?? 0, loadedEnd)
  const onRange = (first: number, last: number) => {
    // Before the list has measured itself its range is not the view's: load nothing for it.
    if (last - first > 2 * PAGE) return
    for (let p = Math.floor(first / PAGE); p <= Math.floor(Math.min(last, Math.max(0, count - 1)) / PAGE); p++) void loadPage(p)
    // A nested row needs the page before it to know its parent.
    if (first > 0 && first % PAGE < 5) void loadPage(Math.floor(first / PAGE) - 1)
  }
  return (
    <section class="run">
      <RunHeader run={run} count={count} against={against} />
      <NextStep run={run} />
      {query.get('rerun') === '1' && run.app && <RerunPanel run={run} tail={query.get('tail') === 'live' ? 'live' : 'strict'} />}
      <div class="split">
        <div class="timeline">
          <VirtualList
            testId="timeline"
            count={count + 1}
            estimate={(i) => (rows[i]?.llm ? 110 : 30)}
            onRange={onRange}
            scrollTo={seq}
            row={(i) =>
              i === count ? (
                <div class="end">
                  <h3>The application's outcome</h3>
                  <Outcome app={run.app} testId="outcome" runs={against} testRunner={run.lineage ? undefined : run.labels?.testRunner} />
                </div>
              ) : (
                <TimelineRow row={rows[i]} index={i} group={groups[i]} duration={duration} selected={seq === i} name={name} q={q} />
              )
            }
          />
        </div>
        {seq !== undefined && <ExchangePanel key={seq} run={run} seq={seq} q={q} />}
      </div>
    </section>
  )
}

function RunHeader({ run, count, against }: { run: Run; count: number; against: RunAgainst[] }) {
  const source = run.lineage?.sourceName
  return (
    <div class="runhead">
      <h1 data-testid="run-name">
        {run.name}{' '}
        <span class={`badge ${run.status}`} data-testid="run-status">
          {run.status === 'recording' ? 'recording now' : run.status}
        </span>
      </h1>
      <div class="facts">
        <span data-testid="run-count">{count} exchanges</span>
        {run.stats && <span>{run.stats.modelTurns} model turns</span>}
        {run.stats && <span>{run.stats.hosts.join(', ')}</span>}
        <span>{bytes(run.size)}</span>
        {run.stats && <span>{ms(run.stats.durationMs)}</span>}
        {run.labels?.faultsSeed && <span>faults seed {run.labels.faultsSeed}</span>}
        <AppExit run={run} testId="run-app-exit" />
        <VerdictBadge v={run.stats?.replay} testId="run-verdict" />
      </div>
      {run.lineage && (
        <div class="lineage">
          fork of <a href={`#/run/${seg(source ?? '')}`}>{source ?? run.lineage.sourceDigest.slice(0, 12)}</a>:{' '}
          {run.lineage.patches.map((p) => (
            <code key={p.id} class="patch">
              {p.id} {p.spec}
            </code>
          ))}
        </div>
      )}
      {run.labels?.observedAgainst && (
        <div class="lineage">
          run of the app against <a href={`#/run/${seg(run.labels.observedAgainst)}`}>{run.labels.observedAgainst}</a>
        </div>
      )}
      {against.length > 0 && (
        <div class="lineage" data-testid="runs-against">
          runs of the app against it:{' '}
          {against.map((a) => (
            <span key={a.name} class="against">
              <a href={`#/run/${seg(a.name)}`}>{a.name}</a>
              {a.exit !== undefined ? ` (app exit ${a.exit})` : ''}{' '}
              <button type="button" class="link" onClick={() => go(`/compare?a=${seg(source ?? run.name)}&b=${seg(a.name)}`)}>
                compare
              </button>
            </span>
          ))}
        </div>
      )}
      <div class="actions">
        {source && (
          <button type="button" onClick={() => go(`/compare?a=${seg(source)}&b=${seg(run.name)}`)} data-testid="compare-source">
            Compare with {source}
          </button>
        )}
        {run.app && (
          <button type="button" onClick={() => go(`/run/${seg(run.name)}?rerun=1`)} data-testid="open-rerun">
            Rerun the app against this run
          </button>
        )}
        {(run.stats?.faults ?? 0) > 0 && (
          <button type="button" onClick={() => go(`/faults/${seg(run.name)}`)}>
            Faults and contracts
          </button>
        )}
      </div>
    </div>
  )
}

function TimelineRow({
  row,
  index,
  group,
  duration,
  selected,
  name,
  q,
}: {
  row: Row | undefined
  index: number
  group: { parent?: number; attempt: number } | undefined
  duration: number
  selected: boolean
  name: string
  q: string
}) {
  if (!row) return <div class="trow muted">#{index} …</div>
  const v = row.llm
  const open = () => go(`/run/${seg(name)}/x/${row.seq}${q}`)
  const scale = (t: number) => `${Math.max(0, Math.min(100, (t / duration) * 100))}%`
  const cls = [
    'trow',
    selected ? 'sel' : '',
    group?.parent !== undefined ? 'nested' : '',
    row.error || (row.status ?? 0) >= 400 ? 'failed' : '',
    v ? 'model' : '',
  ].join(' ')
  const last = v?.input.filter((m) => m.role !== 'system').at(-1)
  return (
    // biome-ignore lint/a11y/useSemanticElements: a row holds block content (the model turn), which a <button> may not
    <div
      class={cls}
      role="button"
      tabIndex={0}
      onClick={open}
      onKeyDown={(e) => e.key === 'Enter' && open()}
      data-testid="timeline-row"
      data-seq={row.seq}
      data-kind={v ? 'model' : 'http'}
    >
      <div class="tline">
        <span class="seq">#{row.seq}</span>
        {group && group.attempt > 1 && <span class="badge retry">attempt {group.attempt}</span>}
        {v ? <span class="kind">model {v.model ?? ''}</span> : <span class="kind">{row.method}</span>}
        {!v && <span class="url">{shortUrl(row.url)}</span>}
        <span class={row.error ? 'bad' : (row.status ?? 0) >= 400 ? 'bad' : 'ok'}>{row.error ? `${row.error.code} (${row.error.phase})` : row.status}</span>
        {row.origin === 'patched' && <span class="badge patched">patched {row.patchId}</span>}
        {row.fault && (
          <span class="badge fault" title={row.fault.tag}>
            fault {row.fault.kind} · rule {row.fault.rule} · {row.fault.upstream}
          </span>
        )}
        <span class="bar">
          <span class="wait" style={{ left: scale(row.startMs), width: scale(row.headersMs) }} />
          <span class="body" style={{ left: scale(row.startMs + row.headersMs), width: scale(Math.max(0, row.bodyMs - row.headersMs)) }} />
        </span>
        <span class="muted small">{ms(row.headersMs)}</span>
      </div>
      {v && (
        <div class="turn">
          {v.toolResults.length > 0
            ? v.toolResults.map((r) => (
                <div key={r.callId} class="in">
                  ← tool_result <b>{r.name ?? r.callId}</b> {clip(r.output, 160)}
                </div>
              ))
            : last && (
                <div class="in">
                  ← {last.role}: {clip(last.text, 160)}
                </div>
              )}
          {v.reasoning.length > 0 && <div class="reasoning">reasoning: {clip(v.reasoning.join(' '), 200)}</div>}
          {v.outputText !== '' && <div class="out">→ {clip(v.outputText, 240)}</div>}
          {v.toolCalls.map((c) => (
            <div key={c.index} class="call" data-testid="tool-call">
              → tool_call <b>{c.name}</b> <code>{clip(c.argumentsText, 200)}</code>
            </div>
          ))}
          {v.finish && !['stop', 'tool_calls', 'end_turn', 'tool_use', 'completed'].includes(v.finish) && <div class="bad">finish {v.finish}</div>}
          {v.error && <div class="bad">{v.error}</div>}
        </div>
      )}
    </div>
  )
}
