/**
 * A run: its head and verdicts, then one of three views: the timeline of its exchanges (virtualised, loaded a
 * page at a time, searched and filtered by the server's index of the run, moved through with the keyboard),
 * the summary (totals by model, tool and MCP server) and the waterfall. One exchange in full beside the
 * timeline; fork and rerun. Everything that says where you are (the exchange, the search, the filters, the view)
 * is in the URL, so a link opens the same place.
 */
import { useCallback, useEffect, useMemo, useRef, useState } from 'preact/hooks'
import { get, seg } from './api.ts'
import { ExchangePanel } from './exchange-panel.tsx'
import { bytes, go, ms } from './format.ts'
import { onLive } from './live.ts'
import { Outcome } from './outcome.tsx'
import { RerunPanel } from './rerun-panel.tsx'
import { RENDERERS } from './row-renderers.tsx'
import { placeOf, type RunPlace, replacePath, runPath } from './run-nav.ts'
import { SummaryView, WaterfallView } from './run-summary.tsx'
import { groupRows, type RowGroup } from './timeline-groups.ts'
import type { Row, Run, RunAgainst, RunSummary } from './types.ts'
import { AppExit, NextStep, VerdictBadge } from './verdict.tsx'
import { VirtualList } from './virtual-list.tsx'

const PAGE = 200
const FILTERS = [
  ['model', 'model turns'],
  ['tool', 'tool calls'],
  ['mcp', 'MCP'],
  ['errors', 'errors'],
  ['faults', 'faults'],
  ['slow', 'slow'],
  ['live', 'live'],
] as const

interface Found {
  seqs: number[]
  total: number
  slowMs: number
  tookMs: number
}

/** The run page. */
export function RunPage({ name, query, seq }: { name: string; query: URLSearchParams; seq: number | undefined }) {
  const place = placeOf(query)
  const partialQ = place.partial ? '?partial=1' : ''
  const [run, setRun] = useState<Run | undefined>()
  const [against, setAgainst] = useState<RunAgainst[]>([])
  const [error, setError] = useState('')
  const [rows, setRows] = useState<Array<Row | undefined>>([])
  const [count, setCount] = useState(0)
  const [summary, setSummary] = useState<{ summary: RunSummary; nesting: Array<[number, number, string]> } | undefined>()
  const [found, setFound] = useState<Found | undefined>()
  const [pending, setPending] = useState(false)
  const [cursor, setCursor] = useState(0)
  const loading = useRef(new Set<string>())
  const base = `/api/runs/${seg(name)}`
  const go2 = (p: RunPlace, s?: number) => go(runPath(name, p, s))

  const merge = (list: Row[]) =>
    setRows((old) => {
      const next = old.slice()
      for (const row of list) next[row.seq] = row
      return next
    })
  const loadPage = useCallback(
    async (page: number, force = false) => {
      const key = `p${page}`
      if (loading.current.has(key) && !force) return
      loading.current.add(key)
      const r = await get<{ count: number; rows: Row[] }>(`${base}/timeline?from=${page * PAGE}&limit=${PAGE}${place.partial ? '&partial=1' : ''}`)
      setCount(r.count)
      merge(r.rows)
    },
    [base, place.partial],
  )
  const loadSeqs = async (seqs: number[]) => {
    const missing = seqs.filter((s) => !loading.current.has(`s${s}`))
    if (missing.length === 0) return
    for (const s of missing) loading.current.add(`s${s}`)
    const r = await get<{ rows: Row[] }>(`${base}/timeline?seqs=${missing.join(',')}${place.partial ? '&partial=1' : ''}`)
    merge(r.rows)
  }
  const loadSummary = () =>
    get<{ summary: RunSummary; nesting: Array<[number, number, string]> }>(`${base}/summary${partialQ}`)
      .then(setSummary)
      .catch(() => {})
  const loadHead = () =>
    get<{ run: Run; runsAgainst: RunAgainst[] }>(`${base}${partialQ}`)
      .then((r) => {
        setRun(r.run)
        setAgainst(r.runsAgainst)
        setCount(r.run.exchanges)
        // Statistics and the index read every exchange: they come after the page is up.
        if (!r.run.stats) void get<{ stats: Run['stats'] }>(`${base}/stats${partialQ}`).then((s) => setRun((old) => old && { ...old, stats: s.stats }))
        void loadSummary()
      })
      .catch((e: Error) => setError(e.message))
  useEffect(() => {
    void loadHead()
    void loadPage(0).catch((e: Error) => setError(e.message))
  }, [name, place.partial])

  // The search and filters: answered by the server's index of the run.
  const searching = place.q !== '' || place.filters.length > 0
  useEffect(() => {
    if (!searching) return setFound(undefined)
    const timer = setTimeout(() => {
      const q = new URLSearchParams({ q: place.q, filter: place.filters.join(',') })
      if (place.partial) q.set('partial', '1')
      setPending(true)
      void get<Found>(`${base}/search?${q.toString()}`)
        .then(setFound)
        .catch((e: Error) => setError(e.message))
        .finally(() => setPending(false))
    }, 50)
    return () => clearTimeout(timer)
  }, [place.q, place.filters.join(','), count])

  // Live: a recording that grows shows its new exchanges within a poll of the store (a complete run never changes).
  useEffect(
    () =>
      onLive((live) => {
        if (!place.partial) return
        const mine = live.find((l) => l.name === name && l.status !== 'complete')
        if (!mine) {
          if (live.some((l) => l.name === name && l.status === 'complete')) go(runPath(name, { ...place, partial: false }))
          return
        }
        setCount((c) => {
          if (mine.exchanges !== c) {
            void loadPage(Math.floor(Math.max(0, c - 1) / PAGE), true)
            if (Math.floor((mine.exchanges - 1) / PAGE) !== Math.floor(Math.max(0, c - 1) / PAGE)) void loadPage(Math.floor((mine.exchanges - 1) / PAGE), true)
            void loadSummary()
          }
          return mine.exchanges
        })
      }),
    [name, place.partial],
  )

  // The rows the timeline lists: every exchange, or what the search found.
  const list: number[] | undefined = found?.seqs
  const length = list ? list.length : count
  const seqAt = (i: number) => (list ? list[i] : i)
  const parents = useMemo(() => new Map((summary?.nesting ?? []).map(([s, p, call]) => [s, { parent: p, call }])), [summary])
  // Recomputed when rows arrive, not on every render (a keypress must not walk 10,000 of them).
  const groups = useMemo(() => {
    const g = groupRows(rows.slice(0, count), parents)
    return (s: number): RowGroup | undefined => g[s]
  }, [rows, count, parents])
  const loadedEnd = useMemo(() => rows.reduce((m, r) => (r ? Math.max(m, r.startMs + r.bodyMs) : m), 1), [rows])
  const selectedIndex = seq === undefined ? undefined : list ? list.indexOf(seq) : seq
  useEffect(() => {
    if (selectedIndex !== undefined && selectedIndex >= 0) setCursor(selectedIndex)
  }, [selectedIndex])

  useRunKeys({
    length,
    cursor,
    setCursor,
    open: (i) => {
      const s = seqAt(i)
      if (s !== undefined) go2({ ...place, view: 'timeline' }, s)
    },
    close: () => seq !== undefined && go2(place),
    kindAt: (i) => {
      const s = seqAt(i)
      if (s === undefined) return undefined
      return rows[s]?.kind ?? (summary?.summary.waterfall.bars[s]?.[5] === 1 ? 'model' : undefined)
    },
  })

  if (error)
    return (
      <div class="error" data-testid="error">
        {error}
      </div>
    )
  if (!run) return <div class="muted">Loading {name}…</div>
  const duration = Math.max(run.stats?.durationMs ?? 0, summary?.summary.durationMs ?? 0, loadedEnd)
  const onRange = (first: number, last: number) => {
    // Before the list has measured itself its range is not the view's: load nothing for it.
    if (last - first > 2 * PAGE) return
    if (list) {
      void loadSeqs(list.slice(first, Math.min(last + 1, first + PAGE)).filter((s) => !rows[s]))
      return
    }
    for (let p = Math.floor(first / PAGE); p <= Math.floor(Math.min(last, Math.max(0, count - 1)) / PAGE); p++) void loadPage(p)
    // A retry needs the row before it to count its attempt.
    if (first > 0 && first % PAGE < 5) void loadPage(Math.floor(first / PAGE) - 1)
  }
  const endRow = !list && place.view === 'timeline'
  return (
    <section class="run">
      <RunHeader run={run} count={count} against={against} place={place} />
      <NextStep run={run} />
      {query.get('rerun') === '1' && run.app && (
        // A finished rerun is a new run against this one: the head and the outcome list it.
        <RerunPanel run={run} tail={query.get('tail') === 'live' ? 'live' : 'strict'} onDone={() => void loadHead()} />
      )}
      <Toolbar name={name} place={place} found={found} count={count} pending={pending && !summary} />
      {place.view === 'summary' && (summary ? <SummaryView run={run} s={summary.summary} /> : <p class="muted">Reading the run's exchanges for its totals…</p>)}
      {place.view === 'waterfall' &&
        (summary ? (
          <WaterfallView s={summary.summary} onOpen={(s) => go2({ ...place, view: 'timeline' }, s)} />
        ) : (
          <p class="muted">Reading the run's exchanges for its waterfall…</p>
        ))}
      {place.view === 'timeline' && (
        <div class="split">
          <div class="timeline">
            {list && list.length === 0 && <p class="muted">Nothing in this run matches.</p>}
            <VirtualList
              key={list ? `found:${place.q}:${place.filters.join(',')}` : 'all'}
              testId="timeline"
              count={length + (endRow ? 1 : 0)}
              estimate={(i) => (rows[seqAt(i) ?? -1]?.llm ? 110 : rows[seqAt(i) ?? -1]?.mcp ? 60 : 30)}
              onRange={onRange}
              scrollTo={cursor}
              row={(i) =>
                i === length ? (
                  <div class="end">
                    <h3>The application's outcome</h3>
                    <Outcome app={run.app} testId="outcome" runs={against} testRunner={run.lineage ? undefined : run.labels?.testRunner} />
                  </div>
                ) : (
                  <TimelineRow
                    row={rows[seqAt(i) ?? -1]}
                    seq={seqAt(i) ?? i}
                    group={groups(seqAt(i) ?? i)}
                    duration={duration}
                    selected={seq === seqAt(i)}
                    cursor={cursor === i}
                    open={() => go2(place, seqAt(i))}
                  />
                )
              }
            />
          </div>
          {seq !== undefined && <ExchangePanel key={seq} run={run} seq={seq} q={partialQ} onClose={() => go2(place)} />}
        </div>
      )}
    </section>
  )
}

/** The search box, the filters, the count of what matches and the views. */
function Toolbar({ name, place, found, count, pending }: { name: string; place: RunPlace; found: Found | undefined; count: number; pending: boolean }) {
  const [text, setText] = useState(place.q)
  useEffect(() => setText(place.q), [place.q])
  const toggle = (f: string) =>
    go(runPath(name, { ...place, filters: place.filters.includes(f) ? place.filters.filter((x) => x !== f) : [...place.filters, f] }))
  return (
    <div class="toolbar">
      <input
        id="run-search"
        class="search"
        type="search"
        placeholder="Search URLs, status, bodies, model text, tools   ( / )"
        value={text}
        onInput={(e) => {
          const v = (e.target as HTMLInputElement).value
          setText(v)
          replacePath(runPath(name, { ...place, q: v }))
        }}
        onKeyDown={(e) => {
          if (e.key === 'Escape' || e.key === 'Enter') (e.target as HTMLInputElement).blur()
        }}
        data-testid="run-search"
      />
      {FILTERS.map(([f, label]) => (
        <button type="button" key={f} class={place.filters.includes(f) ? 'chip on' : 'chip'} onClick={() => toggle(f)} data-testid={`filter-${f}`}>
          {label}
          {f === 'slow' && found && place.filters.includes('slow') ? ` ≥ ${ms(found.slowMs)}` : ''}
        </button>
      ))}
      <span class="muted" data-testid="search-count" data-took={found ? Math.round(found.tookMs) : undefined}>
        {pending
          ? "reading the run's exchanges for search (once)…"
          : found
            ? `${found.seqs.length.toLocaleString('en-US')} of ${found.total.toLocaleString('en-US')}`
            : `${count.toLocaleString('en-US')} exchanges`}
      </span>
      <nav class="views">
        {(['timeline', 'summary', 'waterfall'] as const).map((v) => (
          <button type="button" key={v} class={place.view === v ? 'on' : ''} onClick={() => go(runPath(name, { ...place, view: v }))} data-testid={`view-${v}`}>
            {v}
          </button>
        ))}
      </nav>
      <span class="muted small keys" title="j/k: next/previous exchange · Enter: open · /: search · [ ]: previous/next model turn · Esc: close">
        j k ⏎ / [ ] esc
      </span>
    </div>
  )
}

/**
 * The keyboard: j/k move the cursor, Enter opens the exchange under it, / goes to the search, [ and ] jump to
 * the previous/next model turn, Esc closes the exchange. Keys typed into a field are the field's.
 */
function useRunKeys(k: {
  length: number
  cursor: number
  setCursor: (i: number) => void
  open: (i: number) => void
  close: () => void
  kindAt: (i: number) => string | undefined
}) {
  const ref = useRef(k)
  ref.current = k
  useEffect(() => {
    const onKey = (e: KeyboardEvent) => {
      const t = e.target as HTMLElement | null
      if (t && (t.tagName === 'INPUT' || t.tagName === 'TEXTAREA' || t.tagName === 'SELECT' || t.isContentEditable)) return
      if (e.ctrlKey || e.metaKey || e.altKey) return
      const { length, cursor, setCursor, open, close, kindAt } = ref.current
      const move = (i: number) => setCursor(Math.max(0, Math.min(length - 1, i)))
      const jump = (step: 1 | -1) => {
        for (let i = cursor + step; i >= 0 && i < length; i += step) if (kindAt(i) === 'model') return move(i)
      }
      const handled: Record<string, () => void> = {
        j: () => move(cursor + 1),
        k: () => move(cursor - 1),
        Enter: () => open(cursor),
        '/': () => document.getElementById('run-search')?.focus(),
        ']': () => jump(1),
        '[': () => jump(-1),
        Escape: close,
      }
      const act = handled[e.key]
      if (!act) return
      e.preventDefault()
      act()
    }
    addEventListener('keydown', onKey)
    return () => removeEventListener('keydown', onKey)
  }, [])
}

function RunHeader({ run, count, against, place }: { run: Run; count: number; against: RunAgainst[]; place: RunPlace }) {
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
        <AppExit run={run} testId="run-app-exit" against={against} />
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
          <button type="button" onClick={() => go(withParam(runPath(run.name, place), 'rerun=1'))} data-testid="open-rerun">
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

const withParam = (path: string, param: string) => `${path}${path.includes('?') ? '&' : '?'}${param}`

function TimelineRow({
  row,
  seq,
  group,
  duration,
  selected,
  cursor,
  open,
}: {
  row: Row | undefined
  seq: number
  group: RowGroup | undefined
  duration: number
  selected: boolean
  cursor: boolean
  open: () => void
}) {
  if (!row) return <div class={cursor ? 'trow muted cursor' : 'trow muted'}>#{seq} …</div>
  const render = RENDERERS[row.kind] ?? RENDERERS.http
  const scale = (t: number) => `${Math.max(0, Math.min(100, (t / duration) * 100))}%`
  const end = Math.max(row.headersMs, row.bodyMs)
  const cls = [
    'trow',
    selected ? 'sel' : '',
    cursor ? 'cursor' : '',
    group?.parent !== undefined ? 'nested' : '',
    row.error || (row.status ?? 0) >= 400 || row.mcp?.isError || (row.grpc?.status ?? 0) !== 0 ? 'failed' : '',
    row.kind,
  ].join(' ')
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
      data-kind={row.kind}
    >
      <div class="tline">
        <span class="seq">#{row.seq}</span>
        {group && group.attempt > 1 && <span class="badge retry">attempt {group.attempt}</span>}
        {group?.call !== undefined && (
          <span class="badge answers" title={`answers the ${group.call} call of model turn #${group.parent}`}>
            ↳ {group.call} of #{group.parent}
          </span>
        )}
        {render.label(row)}
        <span class={row.error ? 'bad' : (row.status ?? 0) >= 400 ? 'bad' : 'ok'}>{row.error ? `${row.error.code} (${row.error.phase})` : row.status}</span>
        {row.origin === 'patched' && <span class="badge patched">patched {row.patchId}</span>}
        {row.origin === 'live' && <span class="badge verdict-live">live</span>}
        {row.fault && (
          <span class="badge fault" title={row.fault.tag}>
            fault {row.fault.kind} · rule {row.fault.rule} · {row.fault.upstream}
          </span>
        )}
        <span class="bar">
          <span class="wait" style={{ left: scale(row.startMs), width: scale(row.headersMs) }} />
          <span class="body" style={{ left: scale(row.startMs + row.headersMs), width: scale(Math.max(0, end - row.headersMs)) }} />
        </span>
        <span class="muted small dur" title={`response head after ${ms(row.headersMs)}, last chunk after ${ms(end)}`} data-testid="row-duration">
          {ms(end)}
        </span>
      </div>
      {render.body?.(row)}
    </div>
  )
}
