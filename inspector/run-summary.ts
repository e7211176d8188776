/**
 * A run in totals and on a time axis, from its index: by model (calls, input and output tokens, cost where the
 * provider's usage reports one, time to first token of streamed answers, duration to the last chunk), by tool
 * (how often the model called it, the exchanges that ran it, their errors and time), by MCP server; and the
 * waterfall: every exchange as a bar from its start to its last chunk, packed into lanes so that exchanges in
 * flight at once sit on different lanes (the number of lanes is the run's highest concurrency).
 */
import type { IndexedExchange, RunIndex } from './run-index.ts'

/** Totals of one model. */
export interface ModelTotals {
  model: string
  calls: number
  inputTokens: number
  outputTokens: number
  /** Calls whose usage gave token counts. */
  withUsage: number
  /** Sum of the cost the provider's usage reported (`usage.cost`), when any call reported one. */
  cost?: number
  /** Median time to first token of the streamed calls, ms. */
  ttftMs?: number
  /** Median and total duration (to the last chunk), ms. */
  medianMs: number
  totalMs: number
  errors: number
}

/** Totals of one tool: the model's calls of it, and the exchanges that ran it (HTTP or MCP). */
export interface ToolTotals {
  tool: string
  /** Times a model turn asked for it. */
  called: number
  /** Exchanges that ran it (an MCP tools/call of that name, or HTTP calls nested under the call). */
  runs: number
  errors: number
  totalMs: number
}

/** Totals of one MCP server. */
export interface ServerTotals {
  server: string
  transport: string
  calls: number
  toolCalls: number
  errors: number
  totalMs: number
}

/** The waterfall: `[seq, startMs, headersMs, endMs, lane, kind (0 http, 1 model, 2 tool, 3 WebSocket), failed (0/1)]` per exchange. */
export type WaterfallBar = [number, number, number, number, number, number, number]

/** A run summary. */
export interface RunSummary {
  exchanges: number
  errors: number
  faults: number
  live: number
  /** From the first request to the last chunk, ms. */
  durationMs: number
  models: ModelTotals[]
  tools: ToolTotals[]
  servers: ServerTotals[]
  waterfall: {
    bars: WaterfallBar[]
    lanes: number
    /** When the most exchanges were in flight at once (ms from the run's start). */
    peakAtMs: number
  }
  /** ms the index took to build (once per run). */
  indexMs: number
}

const KIND = { http: 0, model: 1, tool: 2, websocket: 3 } as const

/** The summary of an indexed run. */
export function summarize(index: RunIndex): RunSummary {
  const rows = index.rows
  const end = (r: IndexedExchange) => r.startMs + r.endMs
  return {
    exchanges: rows.length,
    errors: rows.filter((r) => r.failed).length,
    faults: rows.filter((r) => r.fault).length,
    live: rows.filter((r) => r.live).length,
    durationMs: rows.reduce((m, r) => Math.max(m, end(r)), 0),
    models: modelTotals(rows),
    tools: toolTotals(rows),
    servers: serverTotals(rows),
    waterfall: waterfall(rows),
    indexMs: Math.round(index.buildMs),
  }
}

function modelTotals(rows: readonly IndexedExchange[]): ModelTotals[] {
  const by = new Map<string, { t: ModelTotals; durations: number[]; ttfts: number[] }>()
  for (const r of rows) {
    if (r.kind !== 'model') continue
    const name = r.model ?? '(model not named)'
    const m = by.get(name) ?? {
      t: { model: name, calls: 0, inputTokens: 0, outputTokens: 0, withUsage: 0, medianMs: 0, totalMs: 0, errors: 0 },
      durations: [],
      ttfts: [],
    }
    m.t.calls++
    if (r.failed) m.t.errors++
    if (r.usage && (r.usage.input !== undefined || r.usage.output !== undefined)) {
      m.t.withUsage++
      m.t.inputTokens += r.usage.input ?? 0
      m.t.outputTokens += r.usage.output ?? 0
    }
    if (r.usage?.cost !== undefined) m.t.cost = (m.t.cost ?? 0) + r.usage.cost
    m.durations.push(r.endMs)
    m.t.totalMs += r.endMs
    if (r.firstChunkMs !== undefined) m.ttfts.push(r.firstChunkMs)
    by.set(name, m)
  }
  return [...by.values()].map(({ t, durations, ttfts }) => {
    t.medianMs = median(durations)
    if (ttfts.length > 0) t.ttftMs = median(ttfts)
    return t
  })
}

function toolTotals(rows: readonly IndexedExchange[]): ToolTotals[] {
  const by = new Map<string, ToolTotals>()
  const of = (tool: string) => {
    const t = by.get(tool) ?? { tool, called: 0, runs: 0, errors: 0, totalMs: 0 }
    by.set(tool, t)
    return t
  }
  for (const r of rows) {
    if (r.kind === 'model') for (const name of r.tools) of(name).called++
    const ran = r.kind === 'tool' && r.mcpMethod === 'tools/call' ? r.tools[0] : r.parent?.call
    if (ran === undefined) continue
    const t = of(ran)
    t.runs++
    if (r.failed) t.errors++
    t.totalMs += r.endMs
  }
  return [...by.values()].sort((a, b) => b.called + b.runs - (a.called + a.runs))
}

function serverTotals(rows: readonly IndexedExchange[]): ServerTotals[] {
  const by = new Map<string, ServerTotals>()
  for (const r of rows) {
    if (r.kind !== 'tool' || r.server === undefined) continue
    const s = by.get(r.server) ?? { server: r.server, transport: r.transport ?? '', calls: 0, toolCalls: 0, errors: 0, totalMs: 0 }
    s.calls++
    if (r.mcpMethod === 'tools/call') s.toolCalls++
    if (r.failed) s.errors++
    s.totalMs += r.endMs
    by.set(r.server, s)
  }
  return [...by.values()]
}

/** Bars packed into lanes in start order, each in the first lane free by its start. */
function waterfall(rows: readonly IndexedExchange[]): RunSummary['waterfall'] {
  const laneEnds: number[] = []
  const bars: WaterfallBar[] = []
  let peak = 0
  let peakAtMs = 0
  for (const r of [...rows].sort((a, b) => a.startMs - b.startMs || a.seq - b.seq)) {
    const start = r.startMs
    const end = r.startMs + r.endMs
    let lane = laneEnds.findIndex((e) => e <= start)
    if (lane < 0) lane = laneEnds.push(end) - 1
    else laneEnds[lane] = end
    const inFlight = laneEnds.filter((e) => e > start).length
    if (inFlight > peak) {
      peak = inFlight
      peakAtMs = start
    }
    bars.push([r.seq, start, r.headersMs, r.endMs, lane, KIND[r.kind], r.failed ? 1 : 0])
  }
  return { bars: bars.sort((a, b) => a[0] - b[0]), lanes: laneEnds.length, peakAtMs }
}

function median(xs: number[]): number {
  if (xs.length === 0) return 0
  const s = [...xs].sort((a, b) => a - b)
  const mid = Math.floor(s.length / 2)
  return s.length % 2 ? (s[mid] as number) : ((s[mid - 1] as number) + (s[mid] as number)) / 2
}
