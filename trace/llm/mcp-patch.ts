/**
 * Fork by meaning on MCP answers: `mcp.result.content[0].text="disk full"`, `mcp.isError=true` (short for
 * `mcp.result.isError`), `mcp.error.message="..."`: a path in the JSON-RPC answer of an MCP exchange, over
 * stdio (the answer line of its transcript) or Streamable HTTP (the JSON body, or the event that carries the
 * answer). Only the patched value's bytes change; the body keeps its chunks at the same lines and events.
 * @example
 * // tr-proxy fork agent --as agent-tool-fails --patch '#7 mcp.isError=true' --patch '#7 mcp.result.content[0].text="disk full"'
 */
import { ErrorCodes, ToolReplayError } from '../errors.ts'
import type { Exchange, Trace } from '../exchange.ts'
import { headerValue } from '../header-pairs.ts'
import { canonicalJson, editJson, type JsonEdit, parseJson } from '../json-codec.ts'
import { formatJsonPath, parseJsonPath } from '../json-path.ts'
import { isJsonRpcResponse } from '../mcp-wire.ts'
import { decodedResponse } from './exchange-bodies.ts'
import { mcpView } from './mcp.ts'
import { rechunkLike, renderSegment, splitSseSegments } from './sse-segments.ts'

/** A parsed `mcp.*` patch action: a path in the JSON-RPC answer and the value to put there. */
export interface McpPatchAction {
  kind: 'mcp'
  /** The path in the answer message, e.g. ['result', 'content', 0, 'text']. */
  path: Array<string | number>
  value: unknown
}

const HELP = 'MCP actions: mcp.result.PATH=JSON (e.g. mcp.result.content[0].text="disk full"), mcp.isError=true, mcp.error.message="..."'

function invalid(text: string, why: string): never {
  throw new ToolReplayError(ErrorCodes.INVALID_PATCH, `Invalid patch "${text}": ${why}. ${HELP}.`, { details: { patch: text } })
}

/** Parses the action part of an `mcp.*` patch (`text` is the whole spec, for messages). */
export function parseMcpPatchAction(text: string, action: string): McpPatchAction {
  const eq = action.indexOf('=')
  if (eq < 0) invalid(text, `"${action}" has no "=VALUE"`)
  const where = action.slice('mcp.'.length, eq)
  const raw = action.slice(eq + 1).trim()
  let value: unknown
  try {
    value = parseJson(raw)
  } catch {
    invalid(text, `the value ${JSON.stringify(raw)} is not JSON (strings need quotes: mcp.result.content[0].text="disk full")`)
  }
  if (where === 'isError') {
    if (typeof value !== 'boolean') invalid(text, 'mcp.isError takes true or false')
    return { kind: 'mcp', path: ['result', 'isError'], value }
  }
  if (!/^(result|error)(?:[.[]|$)/.test(where)) invalid(text, `"mcp.${where}" does not start with result or error`)
  let segments: Array<string | number>
  try {
    segments = parseJsonPath(`$.${where}`).map((s) => (typeof s === 'object' ? Number.NaN : s)) as Array<string | number>
  } catch {
    return invalid(text, `"mcp.${where}" is not a path`)
  }
  if (segments.some((s) => typeof s === 'number' && Number.isNaN(s))) invalid(text, 'a patch path takes no wildcards')
  return { kind: 'mcp', path: segments, value }
}

/** The canonical text of an `mcp.*` action (what lineage stores and the patch id hashes). */
export function canonicalMcpAction(a: McpPatchAction): string {
  return `mcp.${formatJsonPath(a.path).replace(/^\$\.?/, '')}=${canonicalJson(a.value)}`
}

function fail(text: string, trace: Pick<Trace, 'meta'>, x: Exchange, why: string): never {
  throw new ToolReplayError(
    ErrorCodes.INVALID_PATCH,
    `Failed to resolve patch "${text}" against trace "${trace.meta.name}": exchange #${x.seq} (${x.request.method} ${x.request.url}) ${why}`,
    { details: { patch: text, seq: x.seq } },
  )
}

/** The body in pieces (transcript lines, stream events, or the whole JSON), which piece holds the answer, and how to edit it. */
interface Located {
  pieces: string[]
  index: number
  answer: string
  edit(edits: JsonEdit[]): string[]
}

function isAnswer(s: string | undefined): boolean {
  try {
    const v = s === undefined ? undefined : JSON.parse(s)
    return v !== null && typeof v === 'object' && !Array.isArray(v) && isJsonRpcResponse(v)
  } catch {
    return false
  }
}

function locate(trace: Pick<Trace, 'bodies' | 'meta'>, x: Exchange, text: string): Located {
  const view = mcpView(trace, x)
  if (!view) fail(text, trace, x, 'is not an MCP message (mcp+stdio://, or a JSON-RPC POST over Streamable HTTP). Patch it with $.path=JSON instead.')
  if (x.outcome.kind !== 'response') fail(text, trace, x, `has a recorded error (${x.outcome.error.code}), not an answer to patch.`)
  if (!view.answered) fail(text, trace, x, `holds no answer to patch (${view.kind} ${view.method}).`)
  const res = decodedResponse(trace, x)
  if (!res || res.text === undefined) fail(text, trace, x, 'has a response body that is not readable text.')
  const body = res.text as string
  if (view.transport === 'stdio') {
    const pieces = body.split(/(?<=\n)/)
    const index = pieces.findIndex((l) => isAnswer(l.trim()))
    const answer = pieces[index]?.trim() ?? ''
    return { pieces, index, answer, edit: (edits) => pieces.map((l, i) => (i === index ? `${editJson(answer, edits)}\n` : l)) }
  }
  if (res.events) {
    const segments = splitSseSegments(body)
    const index = segments.findIndex((seg) => isAnswer(seg.data))
    return {
      pieces: segments.map((seg) => seg.raw),
      index,
      answer: segments[index]?.data ?? '',
      edit: (edits) => segments.map((seg, i) => (i === index ? renderSegment(seg, { edits }) : seg.raw)),
    }
  }
  return { pieces: [body], index: isAnswer(body) ? 0 : -1, answer: body, edit: (edits) => [editJson(body, edits)] }
}

/** Checks an `mcp.*` patch against its exchange before anything is written: throws TR_INVALID_PATCH. */
export function validateMcpPatch(trace: Pick<Trace, 'bodies' | 'meta'>, x: Exchange, text: string, a: McpPatchAction): void {
  applyMcpPatch(trace, x, text, a)
}

/** Applies an `mcp.*` patch: the patched body cut like the recording, and whether it is now stored decoded. */
export function applyMcpPatch(
  trace: Pick<Trace, 'bodies' | 'meta'>,
  x: Exchange,
  text: string,
  a: McpPatchAction,
): { chunks: Array<{ bytes: Uint8Array; atMs: number }>; decoded: boolean } {
  const at = locate(trace, x, text)
  if (at.index < 0) fail(text, trace, x, 'has no JSON-RPC answer in its body.')
  const top = a.path[0] as string
  if (!(top in (JSON.parse(at.answer) as object)))
    fail(
      text,
      trace,
      x,
      `answered with ${top === 'result' ? 'an error' : 'a result'}, so ${top}.* does not exist. Patch ${top === 'result' ? 'mcp.error.*' : 'mcp.result.*'}, or the body with $.path=JSON.`,
    )
  let after: string[]
  try {
    after = at.edit([{ path: a.path, value: a.value }])
  } catch (err) {
    return fail(text, trace, x, `cannot take this patch: ${(err as Error).message}.`)
  }
  const res = x.outcome.kind === 'response' ? x.outcome.response : undefined
  const decoded = headerValue(res?.headers ?? [], 'content-encoding') !== undefined
  if (decoded) return { chunks: [{ bytes: new TextEncoder().encode(after.join('')), atMs: res?.body.chunks[0]?.atMs ?? 0 }], decoded }
  return { chunks: rechunkLike(at.pieces, after, res?.body.chunks ?? []), decoded }
}
