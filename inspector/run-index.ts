/**
 * A run read once for finding and totals: per exchange its kind (model turn, tool turn, WebSocket session, HTTP), status, timing
 * (to the last chunk), the model, its usage and tool calls, the MCP server and tool, and a lowercase text to
 * search (method, URL, status, error, the start of each decoded body, the model turn's text and tool calls, the
 * MCP call). Built after the page is up (it reads every body once, like the statistics), kept per trace id for
 * a few runs, and extended as a recording grows. A search is then a scan of memory: 10,000 exchanges answer
 * in milliseconds.
 */
import { bodyRefs, type TraceReader } from '../store/index.ts'
import {
  decodeContentEncoding,
  type Exchange,
  formatGrpcBody,
  headerValue,
  isGrpcContentType,
  type LlmUsage,
  type LlmView,
  llmView,
  mcpView,
  type Trace,
  tryUtf8,
} from '../trace/index.ts'
import { lastChunkMs } from './run-view.ts'
import { type NestingInput, nestToolCalls, type ToolParent } from './tool-nesting.ts'
import { websocketSearchText } from './websocket-session.ts'

/** Decoded text of each body kept for search. */
export const SEARCH_BODY_BYTES = 8 * 1024
/** Bodies bigger than this are searched only when stored uncompressed (their first SEARCH_BODY_BYTES). */
const DECODE_LIMIT = 1024 * 1024
/** Runs whose index is kept. */
const KEEP = 4
const READ_BATCH = 200

/** One exchange as the index holds it. */
export interface IndexedExchange {
  seq: number
  kind: 'model' | 'tool' | 'websocket' | 'http'
  method: string
  url: string
  host: string
  status?: number
  /** The recorded error's code. */
  error?: string
  /** An error, or a status of 400 and up. */
  failed: boolean
  fault: boolean
  live: boolean
  startMs: number
  headersMs: number
  /** When the last body chunk arrived, ms after the request (the response's whole duration). */
  endMs: number
  /** When the first body chunk arrived, for a streamed model answer (time to first token). */
  firstChunkMs?: number
  model?: string
  usage?: LlmUsage
  /** Tools the model called (a model turn), or the tool an MCP tools/call ran. */
  tools: string[]
  /** MCP: the server and the JSON-RPC method. */
  server?: string
  transport?: 'stdio' | 'http'
  mcpMethod?: string
  /** The exchange answers this model turn's tool call (tool-nesting.ts). */
  parent?: ToolParent
  /** Lowercase text searched. */
  text: string
}

/** An index of one trace id. */
export interface RunIndex {
  id: string
  rows: IndexedExchange[]
  /** ms the last build or extension took. */
  buildMs: number
  /** The "slow" filter's threshold (slowThreshold). */
  slowMs: number
  /** Nesting in progress: the last model turn that asked for tools, and what came after it (texts kept until settled). */
  nest: { turn?: NestingInput; pending: NestingInput[] }
}

/** Indexes of the runs the page looked at, newest last; built once per complete trace, extended while recording. */
export class RunIndexes {
  readonly #built = new Map<string, Promise<RunIndex>>()

  /** The index of the run `reader` opened, built or extended to its current count. */
  async of(reader: TraceReader): Promise<RunIndex> {
    const id = reader.info.id
    const previous = this.#built.get(id)
    const known = previous ? await previous.catch(() => undefined) : undefined
    if (known && known.rows.length >= reader.info.count) return known
    const next = extend(reader, known)
    this.#built.delete(id)
    this.#built.set(id, next)
    for (const old of [...this.#built.keys()].slice(0, Math.max(0, this.#built.size - KEEP))) this.#built.delete(old)
    return next
  }
}

async function extend(reader: TraceReader, known: RunIndex | undefined): Promise<RunIndex> {
  const started = performance.now()
  const rows = known ? [...known.rows] : []
  const nest = known ? { ...known.nest, pending: [...known.nest.pending] } : { pending: [] as NestingInput[] }
  const bySeq = new Map(rows.map((r) => [r.seq, r]))
  // Nesting needs the model turns on both sides of an exchange: exchanges are settled as the next model turn
  // arrives, so only the texts of those in between are held.
  const settle = (next: NestingInput | undefined) => {
    if (!nest.turn) return
    for (const [seq, p] of nestToolCalls([nest.turn, ...nest.pending, ...(next ? [next] : [])])) {
      const row = bySeq.get(seq)
      if (row) row.parent = p
    }
  }
  for (let from = rows.length; from < reader.info.count; from += READ_BATCH) {
    const page = await reader.page(from, READ_BATCH)
    let bodies = new Map<string, Uint8Array>()
    for (const [i, x] of page.entries()) {
      if (!allHeld(x, bodies)) bodies = await readBodies(reader, page.slice(i))
      const { row, input } = await indexOne(reader, x, bodies)
      rows.push(row)
      bySeq.set(row.seq, row)
      if (input.model) {
        settle(input)
        nest.pending = []
        if (input.model.calls.length > 0) nest.turn = { ...input, requestText: '', responseText: '' }
        else delete nest.turn
      } else if (nest.turn) nest.pending.push(input)
    }
  }
  // The exchanges after the last model turn: nested by what they carry (a later turn may still add results).
  settle(undefined)
  if (reader.info.status === 'complete') nest.pending = []
  return { id: reader.info.id, rows, buildMs: performance.now() - started, slowMs: slowThreshold(rows), nest }
}

/** Bodies read ahead at once (their store reads overlap instead of adding up), at most this many... */
const READ_AHEAD_BODIES = 64
/** ...and about this many bytes. */
const READ_AHEAD_BYTES = 8 * 1024 * 1024

const allHeld = (x: Exchange, bodies: ReadonlyMap<string, Uint8Array>) => [...bodyRefs(x)].every(([ref]) => bodies.has(ref.digest))

/** The bodies of the first exchanges of `next`, read together: as many as READ_AHEAD_BODIES and READ_AHEAD_BYTES allow, at least the first's. */
async function readBodies(reader: TraceReader, next: readonly Exchange[]): Promise<Map<string, Uint8Array>> {
  const wanted = new Map<string, Promise<Uint8Array>>()
  let bytes = 0
  for (const x of next) {
    const refs = [...bodyRefs(x)].filter(([ref]) => !wanted.has(ref.digest))
    const size = refs.reduce((n, [ref]) => n + ref.size, 0)
    if (wanted.size > 0 && (wanted.size + refs.length > READ_AHEAD_BODIES || bytes + size > READ_AHEAD_BYTES)) break
    for (const [ref, use] of refs) wanted.set(ref.digest, reader.bodyBytes(ref, use))
    bytes += size
  }
  const out = new Map<string, Uint8Array>()
  for (const [digest, read] of wanted) out.set(digest, await read)
  return out
}

async function indexOne(reader: TraceReader, x: Exchange, held: ReadonlyMap<string, Uint8Array>): Promise<{ row: IndexedExchange; input: NestingInput }> {
  const head = x.outcome.kind === 'response' ? x.outcome.response : x.outcome.error.partial
  const chunks = head?.body.chunks ?? []
  const row: IndexedExchange = {
    seq: x.seq,
    kind: 'http',
    method: x.request.method.toUpperCase(),
    url: x.request.url,
    host: hostOf(x.request.url),
    failed: x.outcome.kind === 'error' || (head?.status ?? 0) >= 400,
    fault: x.fault !== undefined,
    live: x.origin === 'live',
    startMs: x.timing.startMs,
    headersMs: x.timing.headersMs,
    endMs: Math.max(x.timing.headersMs, lastChunkMs(x)),
    tools: [],
    text: '',
  }
  if (head) row.status = head.status
  if (x.outcome.kind === 'error') row.error = x.outcome.error.code
  const bodies = new Map<string, Uint8Array>()
  for (const [ref, use] of bodyRefs(x)) if (!bodies.has(ref.digest)) bodies.set(ref.digest, held.get(ref.digest) ?? (await reader.bodyBytes(ref, use)))
  const trace: Pick<Trace, 'meta' | 'bodies'> = { meta: reader.info.meta, bodies }
  const requestText = bodyText(bodies, x.request.body, x.request.headers)
  const responseText = head ? bodyText(bodies, head.body, head.headers) : ''
  const ask = `${row.method} ${safeDecode(x.request.url)} ${requestText}`
  const input: NestingInput = { seq: x.seq, requestText: ask, responseText }
  const parts = [
    row.method,
    x.request.url,
    safeDecode(x.request.url),
    String(row.status ?? ''),
    row.error ?? '',
    x.outcome.kind === 'error' ? x.outcome.error.message : '',
  ]
  // A model call is a POST with a body, or a WebSocket session speaking OpenAI Realtime.
  const model = (x.request.method.toUpperCase() === 'POST' && x.request.body) || x.websocket ? modelView(trace, x) : undefined
  if (model) {
    row.kind = 'model'
    if (model.model !== undefined) row.model = model.model
    if (model.usage) row.usage = model.usage
    if (model.stream && chunks.length > 0) row.firstChunkMs = (chunks[0] as { atMs: number }).atMs
    row.tools = model.toolCalls.map((c) => c.name)
    input.model = {
      calls: model.toolCalls.map((c) => ({ name: c.name, arguments: c.arguments })),
      results: model.toolResults.map((r) => ({ name: r.name, output: r.output })),
    }
    const last = model.input.filter((m) => m.role !== 'system').at(-1)
    parts.push(
      model.model ?? '',
      last?.text ?? '',
      // A Realtime session: every item the client sent, not only the last.
      ...(model.responses ? model.input.map((m) => m.text) : []),
      ...model.toolResults.map((r) => `${r.name ?? ''} ${r.output}`),
      model.outputText,
      ...model.reasoning,
      ...model.toolCalls.map((c) => `${c.name} ${c.argumentsText}`),
      model.error ?? '',
    )
  } else if (x.websocket) {
    row.kind = 'websocket'
    parts.push(websocketSearchText(bodies, x, SEARCH_BODY_BYTES))
  } else {
    const mcp = mcpView(trace, x)
    if (mcp) parts.push(...indexMcp(row, input, mcp))
    parts.push(requestText, responseText)
  }
  row.text = parts.join('\n').toLowerCase()
  return { row, input }
}

/** Marks `row` as an MCP message (`mcp`), names its tool for nesting, and returns the text it is found by. */
function indexMcp(row: IndexedExchange, input: NestingInput, mcp: NonNullable<ReturnType<typeof mcpView>>): string[] {
  row.kind = 'tool'
  row.server = mcp.server
  row.transport = mcp.transport
  row.mcpMethod = mcp.method
  if (mcp.tool) {
    row.tools = [mcp.tool]
    if (mcp.method === 'tools/call') input.mcpTool = mcp.tool
  }
  if (mcp.isError || mcp.error || mcp.failure) row.failed = true
  return [
    mcp.server,
    mcp.method,
    mcp.tool ?? '',
    mcp.uri ?? '',
    mcp.prompt ?? '',
    JSON.stringify(mcp.arguments ?? ''),
    ...(mcp.content ?? []),
    mcp.error?.message ?? '',
  ]
}

/** The start of a body as text (decoded when compressed and not too big); '' for binary. */
function bodyText(bodies: ReadonlyMap<string, Uint8Array>, ref: Exchange['request']['body'], headers: Exchange['request']['headers']): string {
  const raw = ref ? bodies.get(ref.digest) : undefined
  if (!raw || raw.byteLength === 0) return ''
  const encoding = headerValue(headers, 'content-encoding')
  let bytes = raw
  if (encoding) {
    if (raw.byteLength > DECODE_LIMIT) return ''
    try {
      bytes = decodeContentEncoding(raw, encoding)
    } catch {
      return ''
    }
  }
  // A gRPC body is searched as its messages read (protobuf fields, JSON), not as framed bytes.
  if (isGrpcContentType(headerValue(headers, 'content-type'))) return formatGrpcBody(bytes.subarray(0, DECODE_LIMIT), headers).slice(0, SEARCH_BODY_BYTES)
  return tryUtf8(bytes.subarray(0, SEARCH_BODY_BYTES)) ?? tryUtf8(bytes.subarray(0, SEARCH_BODY_BYTES - 3)) ?? ''
}

function modelView(trace: Pick<Trace, 'meta' | 'bodies'>, x: Exchange): LlmView | undefined {
  try {
    return llmView(trace, x)
  } catch {
    return undefined
  }
}

function safeDecode(url: string): string {
  try {
    return decodeURIComponent(url)
  } catch {
    return url
  }
}

function hostOf(url: string): string {
  try {
    return new URL(url).host
  } catch {
    return ''
  }
}

/** The filters of the page: each keeps the exchanges it names. */
export const FILTERS = ['model', 'tool', 'mcp', 'errors', 'faults', 'slow', 'live'] as const
export type Filter = (typeof FILTERS)[number]

/** What a search answers. */
export interface SearchAnswer {
  /** Exchanges in the run. */
  total: number
  /** Matching seqs, in order. */
  seqs: number[]
  /** The "slow" threshold: the run's slowest tenth take at least this long (ms, to the last chunk). */
  slowMs: number
  /** ms the search itself took (the index was ready). */
  tookMs: number
}

/**
 * Exchanges matching every term of `query` (case-insensitive substrings; a "quoted phrase" is one term;
 * `status:500`, `model:gpt`, `tool:NAME`, `host:api`, `method:post` match those fields) and every filter.
 */
export function search(index: RunIndex, query: string, filters: readonly Filter[]): SearchAnswer {
  const started = performance.now()
  const slowMs = index.slowMs
  const terms = splitQuery(query).map(parseTerm)
  const seqs: number[] = []
  for (const r of index.rows) {
    if (filters.every((f) => keeps(f, r, slowMs)) && terms.every((t) => t(r))) seqs.push(r.seq)
  }
  return { total: index.rows.length, seqs, slowMs, tookMs: performance.now() - started }
}

/** The terms of a query, lowercase: words, and "quoted phrases" kept whole. */
export function splitQuery(query: string): string[] {
  const out: string[] = []
  for (const m of query.toLowerCase().matchAll(/"([^"]*)"?|(\S+)/g)) {
    const t = m[1] ?? m[2] ?? ''
    if (t !== '') out.push(t)
  }
  return out
}

function parseTerm(term: string): (r: IndexedExchange) => boolean {
  const m = /^(status|model|tool|host|method):(.+)$/.exec(term)
  if (!m) return (r) => r.text.includes(term)
  const [, field, value = ''] = m
  if (field === 'status')
    return (r) =>
      String(r.status ?? r.error ?? '')
        .toLowerCase()
        .startsWith(value)
  if (field === 'model') return (r) => (r.model ?? '').toLowerCase().includes(value)
  if (field === 'tool') return (r) => r.tools.some((t) => t.toLowerCase().includes(value)) || (r.parent?.call ?? '').toLowerCase().includes(value)
  if (field === 'host') return (r) => r.host.toLowerCase().includes(value)
  return (r) => r.method.toLowerCase() === value
}

function keeps(f: Filter, r: IndexedExchange, slowMs: number): boolean {
  switch (f) {
    case 'model':
      return r.kind === 'model'
    case 'tool':
      return r.kind === 'tool' || r.parent !== undefined
    case 'mcp':
      return r.kind === 'tool'
    case 'errors':
      return r.failed
    case 'faults':
      return r.fault
    case 'slow':
      return r.endMs >= slowMs
    case 'live':
      return r.live
  }
}

/** The shortest duration among the run's slowest tenth (at least one exchange). */
export function slowThreshold(rows: readonly IndexedExchange[]): number {
  if (rows.length === 0) return 0
  const sorted = rows.map((r) => r.endMs).sort((a, b) => b - a)
  return sorted[Math.max(0, Math.ceil(rows.length / 10) - 1)] as number
}
