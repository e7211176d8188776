/**
 * Drift in shape: how a live answer differs from the recorded one in ways that break an app, not in values
 * that vary from run to run. Compared, in this order: the outcome (a response or a network error), the status,
 * the media type, the kind of body (JSON, event stream, text, binary), then
 * - JSON bodies: fields added, removed or retyped, with their paths (trace/json-shape.ts);
 * - event streams: event types that appeared or disappeared, and the shape of each type's JSON data;
 * - model calls (the LLM view, trace/llm): tools the model called that it no longer calls (or now calls), each
 *   tool's argument schema, and the finish reason. Their raw JSON and event types are not compared: what a
 *   model chose to say changes them every run, and the LLM view already says it in model terms;
 * - MCP messages (stdio or Streamable HTTP, trace/llm/mcp.ts), in MCP terms: an answer that became an error (or
 *   a tool error), the tools a `tools/list` offers and each one's input and output schemas (as values: a schema
 *   is a contract), the shape of any other result, and the notifications and server requests that came with it.
 *   Their framing (ids, the event stream, a session id) is not compared.
 * Bodies are compared only when the status is the same (an error page has another shape by design).
 * Pure: used by `tr-proxy drift` (cli/commands/drift.ts) on a recorded exchange and its live re-send.
 * @example
 * const { changes } = compareExchangeShapes({ trace: a, exchange: a.exchanges[0] }, { trace: b, exchange: b.exchanges[0] })
 * changes.map(formatShapeDrift) // ['removed $.name (string)', 'type changed $.price: number → string']
 */
import { tryUtf8 } from './body.ts'
import { decodeContentEncoding } from './content-encoding.ts'
import type { Exchange, RecordedResponse, Trace } from './exchange.ts'
import { headerValue } from './header-pairs.ts'
import { tryParseJson } from './json-codec.ts'
import { diffJson } from './json-path.ts'
import { compareShapes, type JsonShape, ShapeBuilder } from './json-shape.ts'
import { type LlmView, llmView, type McpView, mcpView } from './llm/index.ts'
import { isEventStream, parseSse } from './sse.ts'

/** What kind of shape change. */
export type DriftKind =
  | 'outcome_changed'
  | 'status_changed'
  | 'content_type_changed'
  | 'body_kind_changed'
  | 'field_added'
  | 'field_removed'
  | 'type_changed'
  | 'event_type_added'
  | 'event_type_removed'
  | 'tool_call_added'
  | 'tool_call_removed'
  | 'finish_changed'
  | 'model_api_changed'
  | 'tool_added'
  | 'tool_removed'
  | 'schema_changed'

/** One change in shape between a recorded answer (before) and a live one (after). */
export interface ShapeDrift {
  kind: DriftKind
  /** JSON path of a field: in the body, in the data of `event`, or in the arguments of `tool`. */
  path?: string
  /** The event type (`event:` name, "message" by default) a change is about. */
  event?: string
  /** The tool a change is about. */
  tool?: string
  before?: string
  after?: string
}

/** The shape comparison of one exchange. */
export interface ExchangeShapeReport {
  /** `llm` when both answers are model calls Tool Replay reads, `mcp` when both are MCP messages (see the header). */
  compared: 'http' | 'llm' | 'mcp'
  changes: ShapeDrift[]
  /** Set when a body was too big or deep to take its whole shape, or changes were cut at the limit. */
  truncated: boolean
  /** Why part of the answer was not compared ("bodies not compared: the status changed"). */
  notes: string[]
}

/** One side of the comparison: an exchange and the trace holding its bodies. */
export interface ShapeSide {
  trace: Pick<Trace, 'bodies' | 'meta'>
  exchange: Exchange
}

/** Options of `compareExchangeShapes`. */
export interface ShapeCompareOptions {
  /** Changes kept per exchange (default 100). */
  maxChanges?: number
  /** Largest decoded body whose shape is taken (default 64 MiB); a bigger one is noted, not compared. */
  maxBodyBytes?: number
}

type BodyKind = 'empty' | 'json' | 'events' | 'text' | 'binary' | 'undecodable'

interface BodyShape {
  kind: BodyKind
  json?: JsonShape
  /** Per event type, the merged shape of its JSON data (a type whose data is never JSON has an empty shape). */
  events?: Map<string, JsonShape>
}

/** Compares a recorded exchange's answer with a live one, in shape. Pure. */
export function compareExchangeShapes(recorded: ShapeSide, live: ShapeSide, options: ShapeCompareOptions = {}): ExchangeShapeReport {
  const max = options.maxChanges ?? 100
  const report: ExchangeShapeReport = { compared: 'http', changes: [], truncated: false, notes: [] }
  const a = responseOf(recorded.exchange)
  const b = responseOf(live.exchange)
  if (!a || !b) {
    const before = outcomeText(recorded.exchange)
    const after = outcomeText(live.exchange)
    if (before !== after) report.changes.push({ kind: 'outcome_changed', before, after })
    return report
  }
  if (a.status !== b.status) report.changes.push({ kind: 'status_changed', before: String(a.status), after: String(b.status) })
  const ta = mediaType(a)
  const tb = mediaType(b)
  if (ta !== tb) report.changes.push({ kind: 'content_type_changed', before: ta || '(none)', after: tb || '(none)' })
  if (a.status !== b.status) {
    report.notes.push('bodies not compared: the status changed')
    return report
  }
  const va = llmView(recorded.trace, recorded.exchange)
  const vb = llmView(live.trace, live.exchange)
  const builder = new ShapeBuilder()
  const ma = va ? undefined : mcpView(recorded.trace, recorded.exchange)
  const mb = ma && mcpView(live.trace, live.exchange)
  if (ma && mb) {
    report.compared = 'mcp'
    report.changes.push(...compareMcp(ma, mb, builder))
  } else if (va && vb) {
    report.compared = 'llm'
    report.changes.push(...compareLlm(va, vb, builder))
  } else {
    const limit = options.maxBodyBytes ?? 64 * 1024 * 1024
    const sa = bodyShape(recorded.trace, a, builder, limit)
    const sb = bodyShape(live.trace, b, builder, limit)
    report.changes.push(...compareBodies(sa, sb, report.notes))
  }
  report.truncated = builder.truncated
  if (report.changes.length > max) {
    report.changes = report.changes.slice(0, max)
    report.truncated = true
  }
  return report
}

function responseOf(x: Exchange): RecordedResponse | undefined {
  return x.outcome.kind === 'response' ? x.outcome.response : undefined
}

function outcomeText(x: Exchange): string {
  if (x.outcome.kind === 'response') return `response ${x.outcome.response.status}`
  return `${x.outcome.error.code} during ${x.outcome.error.phase}`
}

/** The media type without parameters, lower case ("application/json"). */
function mediaType(r: RecordedResponse): string {
  return (headerValue(r.headers, 'content-type') ?? '').split(';')[0]?.trim().toLowerCase() ?? ''
}

function bodyShape(trace: Pick<Trace, 'bodies'>, r: RecordedResponse, builder: ShapeBuilder, limit: number): BodyShape {
  const raw = trace.bodies.get(r.body.digest)
  if (raw === undefined) return { kind: 'undecodable' }
  let bytes: Uint8Array
  try {
    bytes = decodeContentEncoding(raw, headerValue(r.headers, 'content-encoding'), { maxBytes: limit })
  } catch {
    return { kind: 'undecodable' }
  }
  if (bytes.byteLength === 0) return { kind: 'empty' }
  const text = tryUtf8(bytes)
  if (text === undefined) return { kind: 'binary' }
  if (isEventStream(headerValue(r.headers, 'content-type'))) {
    const events = new Map<string, JsonShape>()
    for (const e of parseSse(text)) {
      const type = e.event ?? 'message'
      const shape = events.get(type) ?? builder.empty()
      events.set(type, shape)
      const t = e.data.trimStart()
      const parsed = t.startsWith('{') || t.startsWith('[') ? tryParseJson(e.data) : undefined
      if (parsed) builder.add(parsed.value, shape)
    }
    return { kind: 'events', events }
  }
  const parsed = tryParseJson(text)
  if (parsed) return { kind: 'json', json: builder.add(parsed.value) }
  return { kind: 'text' }
}

function compareBodies(a: BodyShape, b: BodyShape, notes: string[]): ShapeDrift[] {
  if (a.kind === 'undecodable' || b.kind === 'undecodable') {
    notes.push(`bodies not compared: the ${a.kind === 'undecodable' ? 'recorded' : 'live'} body could not be decoded`)
    return []
  }
  if (a.kind !== b.kind) return [{ kind: 'body_kind_changed', before: a.kind, after: b.kind }]
  if (a.json && b.json) return compareShapes(a.json, b.json)
  if (!a.events || !b.events) return []
  const out: ShapeDrift[] = []
  for (const type of a.events.keys()) if (!b.events.has(type)) out.push({ kind: 'event_type_removed', event: type })
  for (const type of b.events.keys()) if (!a.events.has(type)) out.push({ kind: 'event_type_added', event: type })
  for (const [type, sa] of a.events) {
    const sb = b.events.get(type)
    if (sb) out.push(...compareShapes(sa, sb).map((d) => ({ ...d, event: type })))
  }
  return out
}

function compareLlm(a: LlmView, b: LlmView, builder: ShapeBuilder): ShapeDrift[] {
  if (a.api !== b.api) return [{ kind: 'model_api_changed', before: a.api, after: b.api }]
  const out: ShapeDrift[] = []
  const argsA = toolArguments(a, builder)
  const argsB = toolArguments(b, builder)
  for (const name of argsA.keys()) if (!argsB.has(name)) out.push({ kind: 'tool_call_removed', tool: name })
  for (const name of argsB.keys()) if (!argsA.has(name)) out.push({ kind: 'tool_call_added', tool: name })
  for (const [name, sa] of argsA) {
    const sb = argsB.get(name)
    if (sb) out.push(...compareShapes(sa, sb).map((d) => ({ ...d, tool: name })))
  }
  if ((a.finish ?? '') !== (b.finish ?? '')) out.push({ kind: 'finish_changed', before: a.finish ?? '(none)', after: b.finish ?? '(none)' })
  return out
}

/** What an MCP message got: its answer, a tool error, an error, or none. */
function mcpOutcomeKind(v: McpView): string {
  if (v.error) return `error ${v.error.code ?? ''}`.trim()
  if (!v.answered) return v.kind === 'request' ? 'no answer' : 'no answer expected'
  return v.isError ? 'tool error' : 'answer'
}

function compareMcp(a: McpView, b: McpView, builder: ShapeBuilder): ShapeDrift[] {
  const out: ShapeDrift[] = []
  const oa = mcpOutcomeKind(a)
  const ob = mcpOutcomeKind(b)
  if (oa !== ob) out.push({ kind: 'outcome_changed', before: oa, after: ob })
  const sent = (v: McpView) => new Set([...v.notifications, ...v.serverRequests])
  const [na, nb] = [sent(a), sent(b)]
  for (const m of na) if (!nb.has(m)) out.push({ kind: 'event_type_removed', event: m })
  for (const m of nb) if (!na.has(m)) out.push({ kind: 'event_type_added', event: m })
  if (oa !== ob || !a.answered || !b.answered || a.error || b.error) return out
  const ta = toolsOffered(a.result)
  const tb = toolsOffered(b.result)
  if (ta && tb) {
    for (const name of ta.keys()) if (!tb.has(name)) out.push({ kind: 'tool_removed', tool: name })
    for (const name of tb.keys()) if (!ta.has(name)) out.push({ kind: 'tool_added', tool: name })
    for (const [name, x] of ta) {
      const y = tb.get(name)
      if (!y) continue
      for (const key of ['inputSchema', 'outputSchema'] as const) {
        for (const d of diffJson(x[key] ?? null, y[key] ?? null, 20)) {
          const change: ShapeDrift = { kind: 'schema_changed', tool: name, path: `${key}${d.path.slice(1)}` }
          if (d.before !== undefined) change.before = JSON.stringify(d.before)
          if (d.after !== undefined) change.after = JSON.stringify(d.after)
          out.push(change)
        }
      }
    }
    return out
  }
  // Any other answer: the shape of its result (its values change from run to run).
  out.push(...compareShapes(builder.add(a.result ?? null), builder.add(b.result ?? null)))
  return out
}

/** The tools a `tools/list` result offers, by name; undefined for any other result. */
function toolsOffered(result: unknown): Map<string, { inputSchema?: unknown; outputSchema?: unknown }> | undefined {
  const tools = (result as { tools?: unknown } | null | undefined)?.tools
  if (!Array.isArray(tools)) return undefined
  const out = new Map<string, { inputSchema?: unknown; outputSchema?: unknown }>()
  for (const t of tools) {
    const tool = t as { name?: unknown; inputSchema?: unknown; outputSchema?: unknown } | null
    if (tool && typeof tool.name === 'string') out.set(tool.name, { inputSchema: tool.inputSchema, outputSchema: tool.outputSchema })
  }
  return out
}

/** Each tool the model called, with the merged shape of its arguments (arguments that are not JSON add nothing). */
function toolArguments(v: LlmView, builder: ShapeBuilder): Map<string, JsonShape> {
  const out = new Map<string, JsonShape>()
  for (const call of v.toolCalls) {
    const shape = out.get(call.name) ?? builder.empty()
    out.set(call.name, shape)
    if (call.argumentsValid) builder.add(call.arguments, shape)
  }
  return out
}

/** One change as a line: `removed $.name (string)`, `event "progress" no longer sent`. */
export function formatShapeDrift(d: ShapeDrift): string {
  const where =
    d.event !== undefined && d.path !== undefined ? `event "${d.event}" ` : d.tool !== undefined && d.path !== undefined ? `tool "${d.tool}" arguments ` : ''
  const schema = `${d.before ?? '(none)'} → ${d.after ?? '(none)'}`
  switch (d.kind) {
    case 'outcome_changed':
      return `outcome ${d.before} → ${d.after}`
    case 'status_changed':
      return `status ${d.before} → ${d.after}`
    case 'content_type_changed':
      return `content type ${d.before} → ${d.after}`
    case 'body_kind_changed':
      return `body ${d.before} → ${d.after}`
    case 'field_added':
      return `${where}added ${d.path} (${d.after})`
    case 'field_removed':
      return `${where}removed ${d.path} (${d.before})`
    case 'type_changed':
      return `${where}type changed ${d.path}: ${d.before} → ${d.after}`
    case 'event_type_added':
      return `event type "${d.event}" is new`
    case 'event_type_removed':
      return `event type "${d.event}" no longer sent`
    case 'tool_call_added':
      return `model now calls tool "${d.tool}"`
    case 'tool_call_removed':
      return `model no longer calls tool "${d.tool}"`
    case 'finish_changed':
      return `finish reason ${d.before} → ${d.after}`
    case 'model_api_changed':
      return `model API ${d.before} → ${d.after}`
    case 'tool_added':
      return `the server now offers tool "${d.tool}"`
    case 'tool_removed':
      return `the server no longer offers tool "${d.tool}"`
    case 'schema_changed':
      return `tool "${d.tool}" ${d.path}: ${schema}`
  }
}
