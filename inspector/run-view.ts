/**
 * What the page shows of the store's runs: the list (cheap facts first, statistics computed once per
 * complete trace and cached), a run's head, and its timeline a page at a time. A page loads only the bodies
 * of its own exchanges: a 10,000-exchange run opens as fast as a 10-exchange one.
 */
import type { ContractReport, FaultsConfig } from '../faults/index.ts'
import { checkContracts } from '../faults/index.ts'
import { bodyRefs, type TraceReader, type TraceStore } from '../store/index.ts'
import {
  type AppRun,
  type Exchange,
  faultTag,
  type Lineage,
  type LlmView,
  llmView,
  type McpView,
  mcpAsk,
  mcpNotes,
  mcpOutcome,
  mcpView,
  presentLlmView,
  type Trace,
  upstreamPhrase,
} from '../trace/index.ts'
import { type GrpcCallRow, grpcCallOf } from './grpc-call.ts'
import { newTally, type ReplayVerdict, replayVerdict, tally } from './verdict.ts'
import { type WebSocketSessionRow, websocketLastMs, websocketSessionRow } from './websocket-session.ts'

/** One run in the list. */
export interface RunListing {
  name: string
  id: string
  status: 'complete' | 'recording' | 'partial'
  exchanges: number
  createdAt: string
  /** Bytes of the bodies the exchanges reference. */
  size: number
  lineage?: Lineage
  labels?: Record<string, string>
  app?: AppRun
  /** Written by a recording of this store (not imported or forked). */
  recorded: boolean
  stats?: RunStats
}

/** Facts that need the exchanges (and the model calls' bodies) read once. */
export interface RunStats {
  modelTurns: number
  hosts: string[]
  errors: number
  patched: number
  faults: number
  faultKinds: string[]
  /** End of the last response, ms from the run's start. */
  durationMs: number
  /** With a contracts file: whether every contract held. */
  contractsOk?: boolean
  /** The seqs of the model turns, in order (what a fork at some point will change next). */
  modelTurnSeqs: number[]
  /** For a run of the app against a trace (replay --record-as, a rerun): how the replay went. */
  replay?: ReplayVerdict
}

/** An MCP message as a tool turn: which server, what it asked, what came back. */
export interface ToolTurnRow {
  server: string
  transport: 'stdio' | 'http'
  /** Over HTTP also `stream` (the session's background GET) and `end` (its DELETE). */
  kind: McpView['kind']
  method: string
  tool?: string
  /** `tools/call write_file {"path":"a.txt"}`. */
  ask: string
  /** What came back, in one phrase. */
  outcome: string
  isError: boolean
  notes: string[]
}

/** One timeline row: an exchange, read in model terms when it is a model call, in tool terms when it is MCP. */
export interface TimelineRow {
  seq: number
  /**
   * Which renderer reads it: a model turn, a tool turn (MCP over stdio or HTTP), a gRPC call, a WebSocket session,
   * or an HTTP exchange.
   */
  kind: 'model' | 'tool' | 'grpc' | 'websocket' | 'http'
  method: string
  url: string
  /** `'2'` when the app sent it over HTTP/2. */
  httpVersion?: '2'
  status?: number
  error?: { code: string; phase: string; message: string }
  startMs: number
  headersMs: number
  /** When the last body chunk arrived, ms after the request (chunk times count from the request). */
  bodyMs: number
  size: number
  origin?: string
  patchId?: string
  fault?: { rule: string; kind: string; phase: string; tag: string; upstream: string }
  /** The SDK's retry attempt header, when it sent one. */
  attempt?: number
  llm?: LlmView
  mcp?: ToolTurnRow
  grpc?: GrpcCallRow
  /** A WebSocket session's messages each way and how it ended (also on a Realtime session's model row). */
  websocket?: WebSocketSessionRow
}

/** Exchanges per timeline page. */
export const TIMELINE_PAGE = 200

/** Runs the store holds, statistics included where they are already known. */
export async function listRuns(store: TraceStore, stats: StatsCache): Promise<RunListing[]> {
  const out: RunListing[] = []
  for (const t of await store.listTraces()) {
    let reader: TraceReader
    try {
      reader = await store.openTrace(t.name, t.status === 'complete' ? {} : { partial: true })
    } catch {
      continue // replaced or removed since it was listed
    }
    if (reader.info.id !== t.id && t.status !== 'complete') continue
    out.push({ ...listing(reader, t.status), ...(stats.known(reader.info.id) ? { stats: stats.known(reader.info.id) } : {}) })
  }
  return out
}

/**
 * A run's head: the listing, with its statistics only when they are already known (computing them reads every
 * exchange and the model calls' bodies: the page asks for them separately, so a big run opens at once).
 */
export function runHead(reader: TraceReader, status: RunListing['status'], stats: StatsCache): RunListing {
  const known = stats.known(reader.info.id)
  return { ...listing(reader, status), ...(known ? { stats: known } : {}) }
}

function listing(reader: TraceReader, status: RunListing['status']): RunListing {
  const { info } = reader
  const l: RunListing = {
    name: info.name,
    id: info.id,
    status,
    exchanges: info.count,
    createdAt: info.createdAt,
    size: info.bodyBytes,
    recorded: info.recorded,
  }
  if (info.meta.lineage) l.lineage = info.meta.lineage
  if (info.meta.labels) l.labels = info.meta.labels
  if (info.meta.app) l.app = info.meta.app
  return l
}

/** Statistics per trace id; a complete trace never changes, so its statistics are computed once. */
export class StatsCache {
  readonly #done = new Map<string, RunStats>()
  readonly #store: TraceStore
  readonly #config: Pick<FaultsConfig, 'contracts' | 'effects' | 'rules'> | undefined

  constructor(store: TraceStore, config?: Pick<FaultsConfig, 'contracts' | 'effects' | 'rules'>) {
    this.#store = store
    this.#config = config
  }

  known(id: string): RunStats | undefined {
    return this.#done.get(id)
  }

  async of(reader: TraceReader): Promise<RunStats> {
    const cached = this.#done.get(reader.info.id)
    if (cached) return cached
    const s = await computeStats(this.#store, reader)
    if (this.#config && this.#config.contracts.length > 0 && s.faults > 0) s.contractsOk = (await contractReport(reader, this.#config)).ok
    if (reader.info.status === 'complete') this.#done.set(reader.info.id, s)
    return s
  }
}

/** The contracts of `config` checked on a whole trace. */
export async function contractReport(reader: TraceReader, config: Pick<FaultsConfig, 'contracts' | 'effects' | 'rules'>): Promise<ContractReport> {
  return checkContracts(await reader.readAll(), config)
}

async function computeStats(store: TraceStore, reader: TraceReader): Promise<RunStats> {
  const hosts = new Set<string>()
  const kinds = new Set<string>()
  const s: RunStats = { modelTurns: 0, hosts: [], errors: 0, patched: 0, faults: 0, faultKinds: [], durationMs: 0, modelTurnSeqs: [] }
  const t = newTally()
  for await (const x of reader.exchanges()) {
    tally(t, x)
    hosts.add(hostOf(x.request.url))
    if (x.outcome.kind === 'error') s.errors++
    if (x.origin === 'patched') s.patched++
    if (x.fault) {
      s.faults++
      kinds.add(x.fault.kind)
    }
    s.durationMs = Math.max(s.durationMs, x.timing.startMs + Math.max(x.timing.headersMs, lastChunkMs(x)))
    const v = x.request.method.toUpperCase() === 'POST' || x.websocket ? await viewOf(reader, x, false) : undefined
    if (v) {
      // A Realtime session (one exchange) holds a model turn per response.
      s.modelTurns += v.responses?.length ?? 1
      s.modelTurnSeqs.push(x.seq)
    }
  }
  s.hosts = [...hosts].sort()
  s.faultKinds = [...kinds].sort()
  const verdict = await replayVerdict(store, reader.info, t)
  if (verdict) s.replay = verdict
  return s
}

/** A run of the app against `name` that a recording of this store made (a rerun), newest first. */
export interface RunAgainst {
  name: string
  createdAt: string
  exit?: number
}

/** The runs of the app against trace `name` recorded by this store (replay --record-as, reruns from the page). */
export async function runsAgainst(store: TraceStore, name: string): Promise<RunAgainst[]> {
  const out: RunAgainst[] = []
  for (const t of await store.listTraces()) {
    if (t.status !== 'complete') continue
    const info = (await store.openTrace(t.name).catch(() => undefined))?.info
    if (!info?.recorded || info.meta.labels?.observedAgainst !== name) continue
    const exit = info.meta.app?.exit?.code
    out.push({ name: info.name, createdAt: info.createdAt, ...(exit !== undefined ? { exit } : {}) })
  }
  return out.sort((a, b) => (a.createdAt < b.createdAt ? 1 : -1))
}

/** A page of the timeline: exchanges `from` .. `from + limit - 1`, model calls read as model turns. */
export async function timelinePage(reader: TraceReader, from: number, limit: number): Promise<TimelineRow[]> {
  const rows: TimelineRow[] = []
  for (const x of await reader.page(from, Math.min(limit, TIMELINE_PAGE))) rows.push(await rowOf(reader, x))
  return rows
}

/** The timeline rows of the exchanges `seqs` (what a search matched), in that order. */
export async function timelineRows(reader: TraceReader, seqs: readonly number[]): Promise<TimelineRow[]> {
  const rows: TimelineRow[] = []
  for (const seq of seqs.slice(0, TIMELINE_PAGE)) if (seq < reader.info.count) rows.push(await rowOf(reader, await reader.exchange(seq)))
  return rows
}

async function rowOf(reader: TraceReader, x: Exchange): Promise<TimelineRow> {
  const head = x.outcome.kind === 'response' ? x.outcome.response : x.outcome.error.partial
  const row: TimelineRow = {
    seq: x.seq,
    kind: 'http',
    method: x.request.method.toUpperCase(),
    url: x.request.url,
    startMs: x.timing.startMs,
    headersMs: x.timing.headersMs,
    bodyMs: lastChunkMs(x),
    size: head?.body.size ?? 0,
  }
  if (head) row.status = head.status
  if (x.request.httpVersion) row.httpVersion = x.request.httpVersion
  if (x.outcome.kind === 'error') row.error = { code: x.outcome.error.code, phase: x.outcome.error.phase, message: x.outcome.error.message }
  if (x.origin) row.origin = x.origin
  if (x.patchId) row.patchId = x.patchId
  if (x.fault) row.fault = { rule: x.fault.rule, kind: x.fault.kind, phase: x.fault.phase, tag: faultTag(x.fault), upstream: upstreamPhrase(x.fault) }
  const ws = websocketSessionRow(x)
  if (ws) row.websocket = ws
  const v = await viewOf(reader, x, true)
  if (v) {
    row.kind = 'model'
    row.llm = presentLlmView(v, 2000)
    if (v.attempt !== undefined) row.attempt = v.attempt
    return row
  }
  if (ws) {
    row.kind = 'websocket'
    return row
  }
  const m = await toolTurnOf(reader, x)
  if (m) {
    row.kind = 'tool'
    row.mcp = m
    return row
  }
  const g = await grpcCallOf(reader, x)
  if (g) {
    row.kind = 'grpc'
    row.grpc = g
  }
  return row
}

/** The MCP view of an exchange as a tool turn row, reading its bodies only when it can be MCP. */
async function toolTurnOf(reader: TraceReader, x: Exchange): Promise<ToolTurnRow | undefined> {
  const stdio = x.request.url.startsWith('mcp+stdio:')
  if (!stdio && (x.request.method.toUpperCase() !== 'POST' || !x.request.body)) return undefined
  const trace: Pick<Trace, 'meta' | 'bodies'> = { meta: reader.info.meta, bodies: new Map() }
  if (!stdio && x.request.body) {
    const request = await reader.bodyBytes(x.request.body, `exchange #${x.seq} request`)
    // A JSON-RPC message says so: anything else is not MCP, and its response is never read.
    if (!Buffer.from(request.buffer, request.byteOffset, request.byteLength).toString('latin1').includes('"jsonrpc"')) return undefined
  }
  for (const [ref, use] of bodyRefs(x)) if (!trace.bodies.has(ref.digest)) trace.bodies.set(ref.digest, await reader.bodyBytes(ref, use))
  const v = mcpView(trace, x)
  if (!v) return undefined
  const row: ToolTurnRow = {
    server: v.server,
    transport: v.transport,
    kind: v.kind,
    method: v.method,
    ask: mcpAsk(v, 200),
    outcome: mcpOutcome(v, 160),
    isError: v.isError === true || v.error !== undefined || v.failure !== undefined,
    notes: mcpNotes(v),
  }
  if (v.tool !== undefined) row.tool = v.tool
  return row
}

/** The LLM view of one exchange, reading only its own bodies (not the response's when `whole` is false and the request is not JSON). */
export async function viewOf(reader: TraceReader, x: Exchange, whole: boolean): Promise<LlmView | undefined> {
  const trace: Pick<Trace, 'meta' | 'bodies'> = { meta: reader.info.meta, bodies: new Map() }
  if (x.websocket) {
    // A WebSocket session is a model call when it speaks OpenAI Realtime: its messages say so.
    for (const [ref, use] of bodyRefs(x)) if (!trace.bodies.has(ref.digest)) trace.bodies.set(ref.digest, await reader.bodyBytes(ref, use))
    return llmView(trace, x)
  }
  if (x.request.method.toUpperCase() !== 'POST' || !x.request.body) return undefined
  const request = await reader.bodyBytes(x.request.body, `exchange #${x.seq} request`)
  trace.bodies.set(x.request.body.digest, request)
  // Every model API's request is a JSON object with `messages` or `input`: anything else is not a model call,
  // and its response is never read (statistics of a long run read little more than the requests).
  if (!whole && !looksLikeModelRequest(request)) return undefined
  for (const [ref, use] of bodyRefs(x)) if (!trace.bodies.has(ref.digest)) trace.bodies.set(ref.digest, await reader.bodyBytes(ref, use))
  return llmView(trace, x)
}

function looksLikeModelRequest(bytes: Uint8Array): boolean {
  let first = 0
  while (first < bytes.length && (bytes[first] === 0x20 || bytes[first] === 0x0a || bytes[first] === 0x0d || bytes[first] === 0x09)) first++
  if (bytes[first] !== 0x7b) return false // '{'
  // A compressed or odd body falls through to the full reading; only plain JSON without either key is ruled out.
  const text = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('latin1')
  return text.includes('"messages"') || text.includes('"input"')
}

/** When the last body chunk of what the app got (a WebSocket session's last message) arrived, ms after the request. */
export function lastChunkMs(x: Exchange): number {
  const ws = websocketLastMs(x)
  if (ws !== undefined) return ws
  const head = x.outcome.kind === 'response' ? x.outcome.response : x.outcome.error.partial
  const chunks = head?.body.chunks ?? []
  return chunks.length > 0 ? (chunks.at(-1) as { atMs: number }).atMs : x.timing.headersMs
}

function hostOf(url: string): string {
  try {
    return new URL(url).host
  } catch {
    return url
  }
}
