/**
 * Commit evidence: which requests of a trace committed an effect upstream. An effect is a request with a
 * non-safe method that reached the upstream and got a 2xx there, whatever the app was given: a response the
 * app never saw (`response_lost`) still committed. An MCP stdio exchange (trace/mcp-wire.ts) committed when the
 * server's transcript holds its answer as a result that is not a tool error (`isError: true`) or a JSON-RPC
 * error. Pure, over a trace.
 */
import {
  bodyBytes,
  canonicalJson,
  computeIdentity,
  decodeContentEncoding,
  type Exchange,
  headerValue,
  isJsonRpcResponse,
  type Outcome,
  parseMcpStdioUrl,
  type RecordedResponse,
  selectJsonPath,
  type Trace,
  transcriptLines,
  tryParseJson,
  tryUtf8,
} from '../trace/index.ts'
import type { EffectRule, ValueRef } from './fault-rules.ts'

/** One committed effect. */
export interface Effect {
  seq: number
  /** "#3 POST /shipments" */
  label: string
  /** The effect rule's noun ("shipment"). */
  name: string
  id: string
  /** Where the id came from; "exchange" means no id was found, so the exchange itself is the effect. */
  idFrom: 'response' | 'header' | 'idempotency-key' | 'exchange'
  /** The logical call the request belongs to (opaque), and how to say it in a report. */
  group: string
  groupLabel: string
  /** False when the app was not given a 2xx for it (a fault replaced the answer, or the app aborted). */
  seenByApp: boolean
  /** The fault rule that fired on this exchange, if any. */
  fault?: string
}

const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS', 'TRACE'])

/** "#3 POST /shipments": an exchange as reports name it. */
export function exchangeRef(x: Exchange): string {
  let path: string
  try {
    const u = new URL(x.request.url)
    path = u.pathname + u.search
  } catch {
    path = x.request.url
  }
  return `#${x.seq} ${x.request.method} ${path}`
}

/** What the upstream really did for an exchange: the fault's record when one fired, else the outcome. Null: never forwarded. */
export function upstreamOutcome(x: Exchange): Outcome | null {
  return x.fault ? x.fault.upstream : x.outcome
}

/** Every effect the trace committed, in trace order, by the first effect rule whose target matches. */
export function commitEvidence(trace: Trace, rules: ReadonlyArray<EffectRule>): Effect[] {
  const out: Effect[] = []
  for (const x of trace.exchanges) {
    const real = upstreamOutcome(x)
    if (real?.kind !== 'response' || real.response.status < 200 || real.response.status > 299) continue
    if (SAFE_METHODS.has(x.request.method.toUpperCase())) continue
    const rule = rules.find((r) => r.target.matches(x.request.method, x.request.url))
    if (!rule) continue
    const mcp = parseMcpStdioUrl(x.request.url) !== undefined
    if (mcp && !mcpSucceeded(trace, real.response)) continue
    const id = effectId(trace, x, real.response, rule)
    const group = callGroup(trace, x, rule.group)
    const seen =
      x.outcome.kind === 'response' && x.outcome.response.status >= 200 && x.outcome.response.status <= 299 && (!mcp || mcpSucceeded(trace, x.outcome.response))
    out.push({
      seq: x.seq,
      label: exchangeRef(x),
      name: rule.name,
      ...id,
      ...group,
      seenByApp: seen,
      ...(x.fault ? { fault: x.fault.rule } : {}),
    })
  }
  return out
}

/** True when an MCP transcript holds an answer that is a result, not a tool error or a JSON-RPC error. */
function mcpSucceeded(trace: Trace, response: RecordedResponse): boolean {
  let text: string | undefined
  try {
    text = tryUtf8(bodyBytes(trace, response.body))
  } catch {
    return false
  }
  if (text === undefined) return false
  return transcriptLines(text).some((l) => {
    if (l.kind !== 'message' || !isJsonRpcResponse(l.message)) return false
    const result = l.message.result as { isError?: unknown } | undefined
    return result !== undefined && result !== null && result.isError !== true
  })
}

function effectId(trace: Trace, x: Exchange, response: RecordedResponse, rule: EffectRule): Pick<Effect, 'id' | 'idFrom'> {
  if (rule.id?.from === 'header') {
    const v = headerValue(response.headers, rule.id.name)
    if (v !== undefined) return { id: v, idFrom: 'header' }
  } else if (rule.id?.from === 'json') {
    const v = jsonAt(decodedBody(trace, response.body, response.headers), rule.id.path)
    if (v !== undefined) return { id: v, idFrom: 'response' }
  } else {
    const key = headerValue(x.request.headers, 'idempotency-key')
    if (key !== undefined) return { id: key, idFrom: 'idempotency-key' }
  }
  return { id: `exchange #${x.seq}`, idFrom: 'exchange' }
}

/**
 * The logical call a request belongs to: a JSON path in the request body or a request header when the
 * rule names one, else the request identity (method, normalized URL, canonical body; idempotency-key,
 * dates and tracing headers never take part), so the retries of one request fall in one group.
 */
export function callGroup(trace: Trace, x: Exchange, group: ValueRef | undefined): Pick<Effect, 'group' | 'groupLabel'> {
  if (group?.from === 'header') {
    const v = headerValue(x.request.headers, group.name)
    if (v !== undefined) return { group: `header:${group.name}=${v}`, groupLabel: `${group.name}: ${v}` }
  } else if (group?.from === 'json' && x.request.body) {
    const v = jsonAt(decodedBody(trace, x.request.body, x.request.headers), group.path)
    if (v !== undefined) return { group: `json:${group.path}=${v}`, groupLabel: `${group.path} = ${JSON.stringify(v)}` }
  }
  const body = x.request.body ? bodyBytes(trace, x.request.body) : null
  const identity = computeIdentity({ method: x.request.method, url: x.request.url, headers: x.request.headers, body })
  const text = body ? decodedText(body) : undefined
  const snippet = text === undefined ? '' : ` ${text.length > 60 ? `${text.slice(0, 57)}...` : text}`
  return { group: `identity:${identity.key}`, groupLabel: `the same request: ${exchangeRef(x).replace(/^#\d+ /, '')}${snippet}` }
}

function decodedBody(trace: Trace, ref: Parameters<typeof bodyBytes>[1], headers: Exchange['request']['headers']): unknown {
  try {
    return tryParseJson(decodeContentEncoding(bodyBytes(trace, ref), headerValue(headers, 'content-encoding')))?.value
  } catch {
    return undefined
  }
}

function decodedText(bytes: Uint8Array): string | undefined {
  const parsed = tryParseJson(bytes)
  return parsed === undefined ? undefined : canonicalJson(parsed.value)
}

function jsonAt(value: unknown, path: string): string | undefined {
  if (value === undefined) return undefined
  const hit = selectJsonPath(value, path)[0]
  if (hit === undefined || hit.value === null || hit.value === undefined) return undefined
  return typeof hit.value === 'string' ? hit.value : canonicalJson(hit.value)
}
