/**
 * The LLM view of a diff: the HTTP diff (trace/diff.ts) aligns the exchanges and finds what changed;
 * this layer re-reads each difference on a pair of model turns in model terms
 * (`#5 model output text: "approve" → "manual_review"`). Ids, `created`, `system_fingerprint`,
 * `obfuscation` and stream chunking are not part of the LLM view, so they never count here; a difference
 * on a model turn that says nothing in LLM terms is set aside in `hidden` (the HTTP view still shows it).
 * @example
 * const d = diffTracesLlm(main, branch)
 * console.log(formatLlmDiffText(d)) // first divergence: #5 model output text: "approve" → "manual_review"
 */
import type { Attribution, DiffDetail, DiffOptions, TraceDiff, TraceDifference } from '../diff.ts'
import { diffTraces, firstNote, formatDetail, formatFaultNote } from '../diff.ts'
import type { Trace } from '../exchange.ts'
import { canonicalJson } from '../json-codec.ts'
import { diffJson } from '../json-path.ts'
import type { LlmMessage, LlmToolCall, LlmView } from './llm-types.ts'
import { compareMcpViews, type McpView, mcpAsk, mcpLabel, mcpOutcome } from './mcp.ts'
import { formatToolCall, llmTimeline, modelTurnCount, outcomePhrase, type TimelineTurn } from './timeline.ts'

/** One difference between two model turns, in LLM terms. */
export interface LlmDiffDetail {
  /** Which side of the call it is on. */
  side: 'request' | 'response'
  /** What differs: "output text", "tool_call[0].arguments $.city", "input[1] user", "finish", "usage.output", ... */
  what: string
  before?: unknown
  after?: unknown
}

/** A difference of the HTTP diff, re-read: `turn` says whether it is on a model turn; `llm` holds the LLM details. */
export interface LlmTraceDifference extends TraceDifference {
  /** tool: an MCP message (its details are in tool terms). */
  turn: 'model' | 'tool' | 'http'
  llm?: LlmDiffDetail[]
}

/** The LLM view of a diff: the HTTP diff's fields, its differences re-read, and what was set aside. */
export interface LlmTraceDiff extends Omit<TraceDiff, 'differences' | 'first'> {
  view: 'llm'
  differences: LlmTraceDifference[]
  first?: LlmTraceDifference
  /** Differences on model turns with no meaning in LLM terms (stream chunking, obfuscation, fields the view does not read). */
  hidden: TraceDifference[]
  /** Model turns per side. */
  modelTurns: { a: number; b: number }
}

/** Diffs two traces and reads the differences on model turns in LLM terms. Pure. */
export function diffTracesLlm(a: Trace, b: Trace, options: DiffOptions = {}): LlmTraceDiff {
  const http = diffTraces(a, b, options)
  const ta = new Map(llmTimeline(a).map((t) => [t.seq, t]))
  const tb = new Map(llmTimeline(b).map((t) => [t.seq, t]))
  const differences: LlmTraceDifference[] = []
  const hidden: TraceDifference[] = []
  const seen = new Set<string>()
  for (const d of http.differences) {
    const label = turnLabel(d)
    const ma = d.a === undefined ? undefined : ta.get(d.a)?.mcp
    const mb = d.b === undefined ? undefined : tb.get(d.b)?.mcp
    if (ma || mb) {
      const out = mcpDifference(d, label, ma, mb, seen)
      if (out === 'hidden') hidden.push(d)
      else if (out) differences.push(out)
      continue
    }
    const va = d.a === undefined ? undefined : ta.get(d.a)?.llm
    const vb = d.b === undefined ? undefined : tb.get(d.b)?.llm
    if (d.kind === 'exchange_missing' || d.kind === 'exchange_added') {
      const v = va ?? vb
      if (v)
        differences.push({
          ...d,
          turn: 'model',
          summary: `${label} model turn ${d.kind === 'exchange_missing' ? 'missing in b' : 'added in b'} (${v.model ?? 'model'} → ${outcomePhrase(v)})`,
        })
      else differences.push({ ...d, turn: 'http' })
      continue
    }
    if (!va || !vb || d.kind === 'order_changed') {
      differences.push({ ...d, turn: va && vb ? 'model' : 'http' })
      continue
    }
    const side = d.kind === 'request_changed' ? 'request' : 'response'
    // A Realtime session's messages both ways are one "response" to the HTTP diff: it is read once, whole.
    const session = va.responses !== undefined || vb.responses !== undefined
    const key = `${d.a}/${d.b}/${session ? 'session' : side}`
    if (seen.has(key)) continue
    seen.add(key)
    const llm = compareLlmViews(va, vb).filter((x) => session || x.side === side)
    if (llm.length > 0) {
      const first = llm[0] as LlmDiffDetail
      const out: LlmTraceDifference = { ...d, turn: 'model', llm, summary: `${label} model ${formatLlmDetail(first)}` }
      if (d.attribution) out.attribution = attributionFirst(d.attribution, first)
      differences.push(out)
      continue
    }
    // Nothing differs in LLM terms: keep what the HTTP diff saw outside the body of a stream (a status, a
    // header, a request parameter such as temperature); set the rest aside.
    const kept = d.details.filter((x) => keepHttpDetail(x))
    if (kept.length === 0) hidden.push(d)
    else differences.push({ ...d, turn: 'model', details: kept, summary: `${label} model ${formatDetail(kept[0] as DiffDetail)}` })
  }
  const counts = { ...http.counts }
  for (const k of Object.keys(counts) as Array<keyof typeof counts>) counts[k] = differences.filter((d) => d.kind === k).length
  const { differences: _d, first: _f, ...rest } = http
  const out: LlmTraceDiff = {
    ...rest,
    view: 'llm',
    equal: differences.length === 0,
    counts,
    differences,
    hidden,
    modelTurns: { a: countModels(ta), b: countModels(tb) },
  }
  if (differences[0]) out.first = differences[0]
  return out
}

/** A difference on MCP turns re-read in tool terms; 'hidden' when it has no meaning there (ids, chunking). */
function mcpDifference(
  d: TraceDifference,
  label: string,
  ma: McpView | undefined,
  mb: McpView | undefined,
  seen: Set<string>,
): LlmTraceDifference | 'hidden' | undefined {
  if (d.kind === 'exchange_missing' || d.kind === 'exchange_added') {
    const m = (ma ?? mb) as McpView
    const outcome = mcpOutcome(m)
    const what = `${mcpAsk(m)}${outcome ? ` → ${outcome}` : ''}`
    return { ...d, turn: 'tool', summary: `${label} ${mcpLabel(m)} ${d.kind === 'exchange_missing' ? 'missing in b' : 'added in b'} (${what})` }
  }
  if (!ma || !mb || d.kind === 'order_changed') return { ...d, turn: ma && mb ? 'tool' : 'http' }
  const side = d.kind === 'request_changed' ? 'request' : 'response'
  const key = `${d.a}/${d.b}/${side}`
  if (seen.has(key)) return undefined
  seen.add(key)
  const llm = compareMcpViews(ma, mb).filter((x) => x.side === side)
  if (llm.length === 0) return 'hidden'
  const out: LlmTraceDifference = { ...d, turn: 'tool', llm, summary: `${label} ${mcpLabel(ma)} ${formatLlmDetail(llm[0] as LlmDiffDetail)}` }
  if (d.attribution) out.attribution = d.attribution
  return out
}

/** The patch that explains the first LLM detail goes first (several patches can touch one turn). */
function attributionFirst(list: Attribution[], first: LlmDiffDetail): Attribution[] {
  const target = first.what === 'output text' ? 'output_text' : first.what.split(' ')[0]
  const explains = (at: Attribution) => at.spec?.includes(` llm.${target}=`) === true
  return [...list.filter(explains), ...list.filter((at) => !explains(at))]
}

function countModels(m: Map<number, TimelineTurn>): number {
  let n = 0
  for (const t of m.values()) n += modelTurnCount(t)
  return n
}

// Stream events and response bodies are what the LLM view reads; a request body parameter the view does not
// read (temperature, max_tokens) and headers/status still matter.
const VOLATILE_BODY_KEYS = new Set(['obfuscation', 'id', 'created', 'created_at', 'system_fingerprint', 'sequence_number'])
function keepHttpDetail(d: DiffDetail): boolean {
  if (d.field === 'events') return false
  if (d.field === 'body') {
    if (d.side === 'response') return false
    const key = /(?:\.([A-Za-z_$][\w$-]*)|\['([^']*)'\])$/.exec(d.path ?? '')
    return !(key && VOLATILE_BODY_KEYS.has(key[1] ?? key[2] ?? ''))
  }
  return true
}

/** "#5" when both sides agree on the sequence number, "#5→#6" when not, "b #6" for an added exchange. */
function turnLabel(d: TraceDifference): string {
  if (d.a !== undefined && d.b !== undefined) return d.a === d.b ? `#${d.a}` : `#${d.a}→#${d.b}`
  return d.a !== undefined ? `#${d.a}` : `b #${d.b}`
}

/** Everything that differs between two model turns, request side first, in reading order. */
export function compareLlmViews(a: LlmView, b: LlmView): LlmDiffDetail[] {
  if (a.responses !== undefined || b.responses !== undefined) return compareSessions(a, b)
  const out: LlmDiffDetail[] = []
  const add = (side: LlmDiffDetail['side'], what: string, before: unknown, after: unknown) => {
    const d: LlmDiffDetail = { side, what }
    if (before !== undefined) d.before = before
    if (after !== undefined) d.after = after
    out.push(d)
  }
  const differ = (x: unknown, y: unknown) => canonicalOr(x) !== canonicalOr(y)
  if (a.api !== b.api) add('request', 'api', a.api, b.api)
  if (a.requestModel !== b.requestModel) add('request', 'model asked for', a.requestModel, b.requestModel)
  if (differ(a.tools, b.tools)) add('request', 'tools offered', a.tools.join(', '), b.tools.join(', '))
  compareInput(a.input, b.input, add)
  // Responses
  if (a.status !== b.status) add('response', 'status', a.status, b.status)
  if (a.error !== b.error) add('response', 'error', a.error, b.error)
  if (a.model !== b.model && a.requestModel === b.requestModel) add('response', 'model', a.model, b.model)
  if (a.outputText !== b.outputText) add('response', 'output text', a.outputText, b.outputText)
  if (a.refusal !== b.refusal) add('response', 'refusal', a.refusal, b.refusal)
  if (differ(a.reasoning, b.reasoning)) add('response', 'reasoning', a.reasoning.join('\n'), b.reasoning.join('\n'))
  compareToolCalls(a.toolCalls, b.toolCalls, (what, x, y) => add('response', what, x, y))
  if (a.finish !== b.finish || a.finishDetail !== b.finishDetail) add('response', 'finish', finishOf(a), finishOf(b))
  if (a.incomplete !== b.incomplete) add('response', 'stream complete', !a.incomplete, !b.incomplete)
  for (const k of ['input', 'output', 'reasoning', 'total', 'cachedInput'] as const) {
    if (a.usage?.[k] !== b.usage?.[k]) add('response', `usage.${k}`, a.usage?.[k], b.usage?.[k])
  }
  return out
}

/**
 * Two Realtime sessions: what the session asked for (model, tools, instructions), then response by response
 * (`response[1] output text`, `response[0] tool_call[0].arguments $.city`, `response[1] input[0] tool`).
 */
function compareSessions(a: LlmView, b: LlmView): LlmDiffDetail[] {
  const out: LlmDiffDetail[] = []
  if (a.api !== b.api) out.push({ side: 'request', what: 'api', before: a.api, after: b.api })
  if (a.requestModel !== b.requestModel) out.push({ side: 'request', what: 'model asked for', before: a.requestModel, after: b.requestModel })
  if (canonicalOr(a.tools) !== canonicalOr(b.tools)) out.push({ side: 'request', what: 'tools offered', before: a.tools.join(', '), after: b.tools.join(', ') })
  const instructions = (v: LlmView) => (v.input[0]?.role === 'system' ? v.input[0].text : undefined)
  if (instructions(a) !== instructions(b)) out.push({ side: 'request', what: 'instructions', before: instructions(a), after: instructions(b) })
  const ra = a.responses ?? []
  const rb = b.responses ?? []
  for (let i = 0; i < Math.max(ra.length, rb.length); i++) {
    const x = ra[i]
    const y = rb[i]
    if (!x || !y) {
      const d: LlmDiffDetail = { side: 'response', what: `response[${i}]` }
      const said = (r: LlmView) => (r.outputText !== '' && r.toolCalls.length === 0 ? r.outputText : outcomePhrase(r))
      if (x) d.before = said(x)
      if (y) d.after = said(y)
      out.push(d)
      continue
    }
    // The session's model and tools are compared once, above; each response says what changed in it.
    const bare = ({ tools: _t, requestModel: _r, model: _m, ...v }: LlmView): LlmView => ({ ...v, tools: [] })
    for (const d of compareLlmViews(bare(x), bare(y))) out.push({ ...d, what: `response[${i}] ${d.what}` })
  }
  if (a.error !== b.error) out.push({ side: 'response', what: 'session error', before: a.error, after: b.error })
  return out
}

function finishOf(v: LlmView): string | undefined {
  return v.finishDetail ? `${v.finish} (${v.finishDetail})` : v.finish
}

function canonicalOr(v: unknown): string {
  try {
    return canonicalJson(v ?? null)
  } catch {
    return String(v)
  }
}

type Add = (side: LlmDiffDetail['side'], what: string, before: unknown, after: unknown) => void

function compareInput(a: LlmMessage[], b: LlmMessage[], add: Add): void {
  const n = Math.max(a.length, b.length)
  for (let i = 0; i < n; i++) {
    const x = a[i]
    const y = b[i]
    if (!x || !y) {
      add('request', `input[${i}]`, x ? messageText(x) : undefined, y ? messageText(y) : undefined)
      continue
    }
    const role = x.role === y.role ? x.role : `${x.role}→${y.role}`
    if (x.role !== y.role || x.text !== y.text)
      add('request', `input[${i}] ${role}${x.role === 'tool' ? ` ${x.name ?? x.toolCallId ?? ''}`.trimEnd() : ''}`, x.text, y.text)
    compareToolCalls(x.toolCalls ?? [], y.toolCalls ?? [], (what, p, q) => add('request', `input[${i}] ${what}`, p, q))
  }
}

function messageText(m: LlmMessage): string {
  const calls = (m.toolCalls ?? []).map((c) => `tool_call ${formatToolCall(c)}`)
  return `${m.role}: ${[m.text, ...calls].filter((t) => t !== '').join(' + ')}`
}

function compareToolCalls(a: LlmToolCall[], b: LlmToolCall[], add: (what: string, before: unknown, after: unknown) => void): void {
  const n = Math.max(a.length, b.length)
  for (let i = 0; i < n; i++) {
    const x = a[i]
    const y = b[i]
    if (!x || !y) {
      add(`tool_call[${i}]`, x ? formatToolCall(x) : undefined, y ? formatToolCall(y) : undefined)
      continue
    }
    if (x.name !== y.name) add(`tool_call[${i}].name`, x.name, y.name)
    if (x.argumentsValid && y.argumentsValid) {
      for (const d of diffJson(x.arguments, y.arguments, 20)) add(`tool_call[${i}].arguments ${d.path}`, d.before, d.after)
    } else if (x.argumentsText !== y.argumentsText) add(`tool_call[${i}].arguments`, x.argumentsText, y.argumentsText)
  }
}

/** "output text: "approve" → "manual_review"" (texts cut around their first difference). */
export function formatLlmDetail(d: LlmDiffDetail): string {
  if (typeof d.before === 'string' && typeof d.after === 'string') {
    const [x, y] = aroundFirstDifference(d.before, d.after)
    return `${d.what}: ${x} → ${y}`
  }
  return `${d.what}: ${shown(d.before)} → ${shown(d.after)}`
}

function shown(v: unknown): string {
  if (v === undefined) return '(absent)'
  const s = typeof v === 'string' ? JSON.stringify(v) : canonicalOr(v)
  return s.length > 80 ? `${s.slice(0, 79)}…` : s
}

/** Two long texts shown from a little before where they start to differ, so the change is visible. */
function aroundFirstDifference(x: string, y: string, width = 60): [string, string] {
  let p = 0
  while (p < x.length && p < y.length && x[p] === y[p]) p++
  const start = p > width / 2 ? p - 20 : 0
  const cut = (s: string) => JSON.stringify(`${start > 0 ? '…' : ''}${s.slice(start, start + width)}${start + width < s.length ? '…' : ''}`)
  return [cut(x), cut(y)]
}

function formatAttribution(at: Attribution): string {
  return `from patch ${at.patchId}${at.spec ? ` (${at.spec})` : ''} on ${at.trace} #${at.seq}`
}

/** Deterministic text of the LLM view of a diff. */
export function formatLlmDiffText(diff: LlmTraceDiff): string {
  const count = (n: number, m: number) => `${n} exchange${n === 1 ? '' : 's'}, ${m} model turn${m === 1 ? '' : 's'}`
  const lines = [`diff a "${diff.a.name}" (${count(diff.a.exchanges, diff.modelTurns.a)}) → b "${diff.b.name}" (${count(diff.b.exchanges, diff.modelTurns.b)})`]
  const n = diff.differences.length
  if (n === 0) lines.push('no differences in LLM terms')
  else {
    const kinds = Object.entries(diff.counts)
      .filter(([, c]) => c > 0)
      .map(([k, c]) => `${c} ${k}`)
    lines.push(`${n} difference${n === 1 ? '' : 's'}: ${kinds.join(', ')}`)
    const first = diff.first as LlmTraceDifference
    lines.push(`first divergence: ${first.summary}${firstNote(first)}`)
    for (const d of diff.differences) {
      const where = [d.a !== undefined ? `a #${d.a}` : undefined, d.b !== undefined ? `b #${d.b}` : undefined].filter(Boolean).join(', ')
      const turnName = d.turn === 'model' ? `${turnLabel(d)} model (${d.exchange})` : d.turn === 'tool' ? `${turnLabel(d)} mcp (${d.exchange})` : d.exchange
      lines.push('', `${d.kind} ${turnName} (${where})`)
      if (d.llm) for (const x of d.llm) lines.push(`  ${formatLlmDetail(x)}`)
      else for (const x of d.details) lines.push(`  ${formatDetail(x)}`)
      for (const at of d.attribution ?? []) lines.push(`  ${formatAttribution(at)}`)
      for (const f of d.faults ?? []) lines.push(`  ${formatFaultNote(f)}`)
    }
  }
  if (diff.hidden.length > 0) {
    const h = diff.hidden.length
    lines.push(
      '',
      `${h} difference${h === 1 ? '' : 's'} on model turns with the same meaning (stream chunking, ids, obfuscation) not shown; --view http shows every HTTP difference`,
    )
  }
  return lines.join('\n')
}
