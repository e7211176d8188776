/**
 * Forks: a new, independent trace made from a source trace plus patches, with lineage.
 * A patch selects exactly one recorded exchange and replaces one thing about its outcome.
 *
 * Patch spec grammar (one string, as given to `tr-proxy fork --patch`):
 *   SPEC      := SELECTOR " " ACTION
 *   SELECTOR  := "#" SEQ                       sequence number in the trace
 *              | METHOD " " URL [" #" OCC]     method + absolute URL (+ occurrence, 0-based; required when
 *                                              the request was recorded more than once)
 *   ACTION    := "$" PATH "=" JSON             set a value inside a JSON response body ($=... replaces it all)
 *              | "body=@" FILE                 replace the whole body with a file's bytes (resolved by the caller)
 *              | "status=" CODE                replace the status code
 *              | "header:" NAME "=" VALUE      set a response header (replacing every field of that name)
 *              | "header:" NAME                remove a response header
 *              | "error=" CODE ["@" PHASE]     turn the outcome into a recorded error (ECONNRESET, ETIMEDOUT, ...)
 *              | "error=" CODE "@response-body:" BYTES
 *                                              ... after BYTES of the recorded body (default: half of it)
 *              | "response=" CODE              turn a recorded error into a response with that status, empty body
 *              | "llm." LLM_TARGET "=" VALUE   change a model turn by meaning (trace/llm/llm-patch.ts):
 *                                              llm.output_text=JSON_STRING, llm.tool_call[N].name=NAME,
 *                                              llm.tool_call[N].arguments=JSON, llm.finish=VALUE
 *              | "realtime.response[" N "]." LLM_TARGET "=" VALUE
 *                                              change one response of an OpenAI Realtime session (a WebSocket
 *                                              exchange) by meaning (trace/llm/patch-openai-realtime.ts):
 *                                              output_text=JSON_STRING, tool_call[M].arguments=JSON, tool_call[M].name=NAME
 *              | "mcp." PATH "=" JSON          change an MCP answer by meaning (trace/llm/mcp-patch.ts):
 *                                              mcp.result.content[0].text=JSON, mcp.isError=true, mcp.error.message=JSON
 *              | "fault=" KIND ["@" N]         inject a fault into one exchange, or "fault=none" to remove
 *                                              one (trace/fault-patch.ts)
 * Patches are resolved against the source before any is applied, then applied in order. A patch keeps its
 * exchange coherent: a new body on an encoded response drops Content-Encoding (the body is stored decoded)
 * and fixes Content-Length; `forkTraceWithNotes` says what was adjusted.
 * @example
 * const branch = forkTrace(source, { name: 'crm-inactive', sourceDigest, patches: ['#0 $.active=false'] })
 */
import { bodyFromBytes } from './body.ts'
import { sha256 } from './digest.ts'
import { ErrorCodes, ToolReplayError } from './errors.ts'
import { ERROR_PHASES, type ErrorPhase, type Exchange, type PatchRecord, type RecordedResponse, type Trace } from './exchange.ts'
import {
  applyFaultPatch,
  arrangeExchanges,
  canonicalFaultAction,
  type FaultPatchAction,
  type FaultPatchEffect,
  parseFaultPatchAction,
  validateFaultPatch,
} from './fault-patch.ts'
import { headerValue } from './header-pairs.ts'
import { canonicalJson, cloneJson, parseJson } from './json-codec.ts'
import { formatJsonPath, parseJsonPath } from './json-path.ts'
import { applyLlmPatch, canonicalLlmAction, type LlmPatchAction, parseLlmPatchAction, validateLlmPatch } from './llm/index.ts'
import { applyMcpPatch, canonicalMcpAction, type McpPatchAction, parseMcpPatchAction, validateMcpPatch } from './llm/mcp-patch.ts'
import {
  applyRealtimePatch,
  canonicalRealtimeAction,
  parseRealtimePatchAction,
  type RealtimePatchAction,
  validateRealtimePatch,
} from './llm/patch-openai-realtime.ts'
import { contentEncoding, lengthNote, patchedError, patchJson, setBody, setBodyChunks } from './patch-bodies.ts'
import { normalizeUrl } from './request-identity.ts'
import { assertValidBranch } from './validate.ts'
import { websocketBodyRefs } from './websocket.ts'

/**
 * node:http taken with process.getBuiltinModule rather than `import`: an ESM import builds the module's namespace
 * by reading every export, and node:http's WebSocket/CloseEvent/MessageEvent getters then load Node's bundled
 * undici (~40 ms of every process start on Node 22-26, measured: import 46 ms, getBuiltinModule 7 ms). Every
 * runtime use of node:http in the sources does the same (scripts/check-layers.mjs keeps it so).
 */
const { STATUS_CODES } = process.getBuiltinModule('node:http')

/** Which exchange a patch applies to. */
export type PatchSelector = { kind: 'seq'; seq: number } | { kind: 'request'; method: string; url: string; occurrence?: number }

/** What a patch replaces. `body-file` is the unresolved form of `body`: read the file, then call `resolvePatchFile`. */
export type PatchAction =
  | { kind: 'json'; path: string; value: unknown }
  | { kind: 'body'; bytes: Uint8Array }
  | { kind: 'body-file'; file: string }
  | { kind: 'status'; status: number }
  | { kind: 'header'; name: string; value: string | null }
  | { kind: 'error'; code: string; phase: ErrorPhase; bytes?: number }
  | { kind: 'response'; status: number }
  | LlmPatchAction
  | McpPatchAction
  | RealtimePatchAction
  | FaultPatchAction

/** A parsed patch. `text` is what the user wrote (kept for messages only; lineage stores the canonical form). */
export interface PatchSpec {
  text: string
  selector: PatchSelector
  action: PatchAction
}

/** A patch resolved against a source trace: the one exchange it selects, and its deterministic id. */
export interface ResolvedPatch {
  /** Short SHA-256 of the canonical spec: the same patch always has the same id. */
  id: string
  /** Canonical spec: normalized URL, canonical JSON value, file bodies by digest (never a machine path). */
  spec: string
  seq: number
  patch: PatchSpec
}

/** What a patch adjusted besides its own change, to keep the exchange coherent (for `tr-proxy fork`'s output). */
export interface PatchNote {
  id: string
  seq: number
  note: string
}

/** A branch and the notes its patches left. */
export interface ForkResult {
  trace: Trace
  notes: PatchNote[]
}

/** Options for `forkTrace`. */
export interface ForkOptions {
  /** Name of the branch trace. */
  name: string
  /** Patches, as spec strings or parsed (with file bodies already resolved). */
  patches: ReadonlyArray<string | PatchSpec>
  /** Digest of the source trace (store `traceDigest(source)`), kept as lineage. */
  sourceDigest: string
}

const PHASES: readonly ErrorPhase[] = ERROR_PHASES
const SPEC_HELP =
  'Write a patch as "SELECTOR ACTION", e.g. "#0 $.active=false" or "GET https://crm.test/customers/42 #0 status=503"; actions: $.path=JSON, body=@FILE, status=CODE, header:NAME=VALUE, header:NAME, error=CODE[@PHASE], error=CODE@response-body:BYTES, response=CODE, llm.output_text="TEXT", llm.tool_call[N].name=NAME, llm.tool_call[N].arguments=JSON, llm.finish=VALUE, realtime.response[N].output_text="TEXT", realtime.response[N].tool_call[M].arguments=JSON, mcp.result.PATH=JSON, mcp.isError=true, fault=KIND[@N], fault=none.'

function invalid(text: string, why: string): never {
  throw new ToolReplayError(ErrorCodes.INVALID_PATCH, `Invalid patch "${text}": ${why}. ${SPEC_HELP}`, { details: { patch: text } })
}

/** Parses a patch spec string. Throws TR_INVALID_PATCH naming the spec and what is wrong. */
export function parsePatchSpec(text: string): PatchSpec {
  const src = text.trim()
  let rest: string
  let selector: PatchSelector
  const seqMatch = /^#(\d+)\s+/.exec(src)
  if (seqMatch) {
    selector = { kind: 'seq', seq: Number(seqMatch[1]) }
    rest = src.slice(seqMatch[0].length)
  } else {
    const m = /^([A-Za-z]+)\s+(\S+)\s+(?:#(\d+)\s+)?/.exec(src)
    if (!m) invalid(text, 'it does not start with a selector ("#SEQ" or "METHOD URL [#OCCURRENCE]")')
    const [whole, method, url, occ] = m as RegExpExecArray
    let normalized: string
    try {
      normalized = normalizeUrl(url as string)
    } catch {
      invalid(text, `"${url}" is not an absolute URL`)
    }
    selector = { kind: 'request', method: (method as string).toUpperCase(), url: normalized }
    if (occ !== undefined) selector.occurrence = Number(occ)
    rest = src.slice(whole.length)
  }
  return { text: src, selector, action: parseAction(text, rest.trim()) }
}

function parseAction(text: string, a: string): PatchAction {
  if (a === '') invalid(text, 'it has no action after the selector')
  if (a.startsWith('$')) {
    const eq = endOfPath(a)
    if (eq === -1) invalid(text, `"${a}" has no "=VALUE"`)
    const path = a.slice(0, eq)
    parseJsonPathForPatch(text, path)
    const raw = a.slice(eq + 1)
    let value: unknown
    try {
      value = parseJson(raw)
    } catch {
      invalid(text, `the value ${JSON.stringify(raw)} is not JSON (strings need quotes: $.name="Ada")`)
    }
    return { kind: 'json', path: formatJsonPath(parseJsonPath(path)), value }
  }
  if (a.startsWith('llm.')) return parseLlmPatchAction(text, a)
  if (a.startsWith('mcp.')) return parseMcpPatchAction(text, a)
  if (a.startsWith('realtime.')) return parseRealtimePatchAction(text, a)
  let m: RegExpExecArray | null
  if ((m = /^body=@(.+)$/s.exec(a))) return { kind: 'body-file', file: m[1] as string }
  if ((m = /^fault=(.*)$/.exec(a))) return parseFaultPatchAction(text, m[1] as string)
  if ((m = /^status=(\d{3})$/.exec(a))) return { kind: 'status', status: statusCode(text, m[1] as string) }
  if ((m = /^response=(\d{3})$/.exec(a))) return { kind: 'response', status: statusCode(text, m[1] as string) }
  if ((m = /^header:([!#$%&'*+.^_`|~0-9A-Za-z-]+)(?:=(.*))?$/s.exec(a))) {
    const value = m[2]
    if (value !== undefined && /[\r\n\0]/.test(value)) invalid(text, 'a header value cannot contain CR, LF or NUL')
    return { kind: 'header', name: (m[1] as string).toLowerCase(), value: value ?? null }
  }
  if ((m = /^error=([A-Z][A-Z0-9_]*)(?:@([a-z-]+)(?::(\d+))?)?$/.exec(a))) {
    const phase = (m[2] ?? 'request') as ErrorPhase
    if (!PHASES.includes(phase)) invalid(text, `unknown error phase "${m[2]}" (use ${PHASES.join(', ')})`)
    if (m[3] === undefined) return { kind: 'error', code: m[1] as string, phase }
    if (phase !== 'response-body') invalid(text, `":${m[3]}" (bytes delivered before the failure) only goes with @response-body`)
    const bytes = Number(m[3])
    if (!Number.isSafeInteger(bytes)) invalid(text, `${m[3]} bytes is out of range`)
    return { kind: 'error', code: m[1] as string, phase, bytes }
  }
  return invalid(text, `unknown action "${a}"`)
}

function parseJsonPathForPatch(text: string, path: string): void {
  try {
    const segs = parseJsonPath(path)
    if (segs.includes('*')) invalid(text, `JSON path "${path}" has a wildcard; a patch must name exactly one place`)
  } catch (err) {
    if (err instanceof ToolReplayError && err.code === ErrorCodes.INVALID_PATCH) throw err
    invalid(text, (err as Error).message)
  }
}

/** Index of the "=" that ends a JSON path, skipping ones inside ['...'] or ["..."]. */
function endOfPath(a: string): number {
  let quote: string | undefined
  for (let i = 0; i < a.length; i++) {
    const ch = a[i]
    if (quote) {
      if (ch === '\\') i++
      else if (ch === quote) quote = undefined
    } else if (ch === "'" || ch === '"') quote = ch
    else if (ch === '=') return i
  }
  return -1
}

function statusCode(text: string, s: string): number {
  const n = Number(s)
  if (n < 100 || n > 599) invalid(text, `status ${s} is outside 100-599`)
  return n
}

/** Turns a `body-file` action into a `body` action with the file's bytes; other specs pass through. */
export function resolvePatchFile(spec: PatchSpec, bytes: Uint8Array): PatchSpec {
  if (spec.action.kind !== 'body-file') return spec
  return { ...spec, action: { kind: 'body', bytes } }
}

/** The canonical text of a patch: what lineage stores and what its id hashes. */
export function canonicalPatchSpec(spec: PatchSpec): string {
  const s = spec.selector
  const selector = s.kind === 'seq' ? `#${s.seq}` : `${s.method} ${s.url}${s.occurrence === undefined ? '' : ` #${s.occurrence}`}`
  const a = spec.action
  let action: string
  switch (a.kind) {
    case 'json':
      action = `${a.path}=${canonicalJson(a.value)}`
      break
    case 'body':
      action = `body=sha256:${sha256(a.bytes)}`
      break
    case 'body-file':
      throw new ToolReplayError(
        ErrorCodes.INVALID_PATCH,
        `Patch "${spec.text}" names the file "${a.file}", which has not been read. Read it and call resolvePatchFile first (the CLI does this).`,
      )
    case 'status':
      action = `status=${a.status}`
      break
    case 'response':
      action = `response=${a.status}`
      break
    case 'header':
      action = a.value === null ? `header:${a.name}` : `header:${a.name}=${a.value}`
      break
    case 'error':
      action = `error=${a.code}@${a.phase}${a.bytes === undefined ? '' : `:${a.bytes}`}`
      break
    case 'llm':
      action = canonicalLlmAction(a)
      break
    case 'mcp':
      action = canonicalMcpAction(a)
      break
    case 'realtime':
      action = canonicalRealtimeAction(a)
      break
    case 'fault':
      action = canonicalFaultAction(a)
      break
  }
  return `${selector} ${action}`
}

/** The deterministic id of a patch: the first 12 hex digits of SHA-256 of its canonical spec. */
export function patchId(spec: PatchSpec): string {
  return sha256(canonicalPatchSpec(spec)).slice(0, 12)
}

/** Label of an exchange as selectors and diffs print it: "GET https://crm.test/customers/42 #0". */
export function exchangeLabel(trace: Pick<Trace, 'exchanges'>, x: Exchange): string {
  return `${x.request.method} ${x.request.url} #${occurrenceOf(trace, x)}`
}

/** 0-based occurrence of an exchange's method + URL among earlier exchanges of the trace. */
export function occurrenceOf(trace: Pick<Trace, 'exchanges'>, x: Exchange): number {
  const key = methodUrlKey(x)
  let n = 0
  for (const y of trace.exchanges) {
    if (y === x) return n
    if (methodUrlKey(y) === key) n++
  }
  return n
}

function methodUrlKey(x: Exchange): string {
  let url: string
  try {
    url = normalizeUrl(x.request.url)
  } catch {
    url = x.request.url
  }
  return `${x.request.method.toUpperCase()} ${url}`
}

/**
 * Resolves every patch against the source before anything is applied. Each must select exactly one
 * exchange; otherwise TR_INVALID_PATCH says what matched and how to be more precise.
 */
export function resolvePatches(source: Trace, patches: ReadonlyArray<string | PatchSpec>): ResolvedPatch[] {
  return patches.map((p) => {
    const patch = typeof p === 'string' ? parsePatchSpec(p) : p
    const s = patch.selector
    let matches: Exchange[]
    if (s.kind === 'seq') matches = source.exchanges.filter((x) => x.seq === s.seq)
    else {
      const all = source.exchanges.filter((x) => methodUrlKey(x) === `${s.method} ${s.url}`)
      matches = s.occurrence === undefined ? all : all.filter((_, i) => i === s.occurrence)
      if (s.occurrence !== undefined && matches.length === 0 && all.length > 0) {
        throw new ToolReplayError(
          ErrorCodes.INVALID_PATCH,
          `Failed to resolve patch "${patch.text}" against trace "${source.meta.name}": ${s.method} ${s.url} was recorded ${all.length} time(s) (occurrences #0-#${all.length - 1}), not #${s.occurrence}. Pick an existing occurrence.`,
          { details: { patch: patch.text, matches: all.map((x) => x.seq) } },
        )
      }
    }
    if (matches.length === 0) {
      const list = source.exchanges
        .slice(0, 10)
        .map((x) => `#${x.seq} ${exchangeLabel(source, x)}`)
        .join('; ')
      throw new ToolReplayError(
        ErrorCodes.INVALID_PATCH,
        `Failed to resolve patch "${patch.text}" against trace "${source.meta.name}": it matches no exchange (the trace has: ${list || 'no exchanges'}). Check the selector with \`tr-proxy show ${source.meta.name}\`.`,
        { details: { patch: patch.text, matches: [] } },
      )
    }
    if (matches.length > 1) {
      throw new ToolReplayError(
        ErrorCodes.INVALID_PATCH,
        `Failed to resolve patch "${patch.text}" against trace "${source.meta.name}": it matches ${matches.length} exchanges (${matches.map((x) => `#${x.seq}`).join(', ')}). Add the occurrence ("... #0") or select by sequence number ("#${(matches[0] as Exchange).seq} ...").`,
        { details: { patch: patch.text, matches: matches.map((x) => x.seq) } },
      )
    }
    // An llm.* patch also needs the right kind of exchange (a model turn, an existing tool call): checked now.
    if (patch.action.kind === 'llm') validateLlmPatch(source, matches[0] as Exchange, patch.text, patch.action)
    if (patch.action.kind === 'mcp') validateMcpPatch(source, matches[0] as Exchange, patch.text, patch.action)
    if (patch.action.kind === 'realtime') validateRealtimePatch(source, matches[0] as Exchange, patch.text, patch.action)
    if (patch.action.kind === 'fault') validateFaultPatch(matches[0] as Exchange, patch.text, patch.action)
    const spec = canonicalPatchSpec(patch)
    return { id: sha256(spec).slice(0, 12), spec, seq: (matches[0] as Exchange).seq, patch }
  })
}

/**
 * Makes a branch: a copy of `source` with the patches applied, origin "patched" and the patch ids on the
 * exchanges they touched, and lineage (source digest, source name, patches). The source is not modified.
 */
export function forkTrace(source: Trace, options: ForkOptions): Trace {
  return forkTraceWithNotes(source, options).trace
}

/** `forkTrace`, plus a note for every adjustment a patch made to keep its exchange coherent. */
export function forkTraceWithNotes(source: Trace, options: ForkOptions): ForkResult {
  if (options.patches.length === 0) {
    throw new ToolReplayError(ErrorCodes.INVALID_PATCH, `Forking trace "${source.meta.name}" needs at least one patch. ${SPEC_HELP}`)
  }
  const resolved = resolvePatches(source, options.patches)
  const exchanges: Exchange[] = cloneJson(source.exchanges)
  const bodies = new Map<string, Uint8Array>(source.bodies)
  const touched = new Set<number>()
  const notes: PatchNote[] = []
  // Fault patches may add an attempt before an exchange or remove one: applied to the list at the end.
  const effects = new Map<number, FaultPatchEffect[]>()
  for (const r of resolved) {
    const x = exchanges.find((e) => e.seq === r.seq) as Exchange
    if (r.patch.action.kind === 'fault') {
      const effect = applyFaultPatch({ meta: source.meta, bodies }, x, { id: r.id, text: r.patch.text }, r.patch.action)
      effects.set(r.seq, [...(effects.get(r.seq) ?? []), effect])
      if (effect.kind === 'insert-before') {
        effect.exchange.patchId = r.id
        continue
      }
      if (effect.kind === 'remove') continue
    } else applyPatch({ meta: source.meta, bodies }, x, r, (note) => notes.push({ id: r.id, seq: x.seq, note }))
    x.origin = 'patched'
    // Several patches on one exchange: all their ids, in order ("a1+b2"); a patch id from the source's own
    // lineage is replaced, since lineage only lists this fork's patches.
    x.patchId = touched.has(x.seq) ? `${x.patchId}+${r.id}` : r.id
    touched.add(x.seq)
  }
  const arranged = arrangeExchanges(exchanges, effects)
  const patches: PatchRecord[] = resolved.map((r) => ({ id: r.id, spec: r.spec }))
  const meta: Trace['meta'] = {
    name: options.name,
    format: source.meta.format,
    lineage: { sourceDigest: options.sourceDigest, sourceName: source.meta.name, patches },
  }
  if (source.meta.labels) meta.labels = { ...source.meta.labels }
  // The branch keeps the command the source was made with (so it can be rerun against the branch), not how
  // it ended: nothing ran against the branch yet.
  if (source.meta.app) meta.app = { command: [...source.meta.app.command], ...(source.meta.app.cwd !== undefined ? { cwd: source.meta.app.cwd } : {}) }
  // Keep only the bodies the branch references: it must replay on its own, and carry nothing else.
  const own = new Map<string, Uint8Array>()
  for (const x of arranged) {
    const u = x.fault?.upstream
    for (const ref of [
      x.request.body,
      x.outcome.kind === 'response' ? x.outcome.response.body : x.outcome.error.partial?.body,
      u?.kind === 'response' ? u.response.body : u?.error.partial?.body,
    ]) {
      if (ref) own.set(ref.digest, bodies.get(ref.digest) as Uint8Array)
    }
    // A WebSocket session's messages are bodies too (a forked Realtime session's rewritten events among them).
    for (const [ref] of websocketBodyRefs(x)) own.set(ref.digest, bodies.get(ref.digest) as Uint8Array)
  }
  assertValidBranch({ meta, exchanges: arranged, bodies: own }, resolved)
  return { trace: { meta, exchanges: arranged, bodies: own }, notes }
}

function applyPatch(trace: Pick<Trace, 'meta' | 'bodies'>, x: Exchange, r: ResolvedPatch, note: (text: string) => void): void {
  const a = r.patch.action
  const fail = (why: string): never => {
    throw new ToolReplayError(
      ErrorCodes.INVALID_PATCH,
      `Failed to apply patch "${r.patch.text}" to exchange #${x.seq} (${x.request.method} ${x.request.url}): ${why}`,
      {
        details: { patch: r.patch.text, seq: x.seq },
      },
    )
  }
  if (a.kind === 'error') {
    x.outcome = { kind: 'error', error: patchedError(trace, x, a, fail, note) }
    return
  }
  if (a.kind === 'response') {
    if (x.outcome.kind === 'response') throw fail('it already has a response; use status=CODE to change its status')
    const empty = bodyFromBytes(new Uint8Array(0))
    trace.bodies.set(empty.ref.digest, empty.bytes)
    x.outcome = {
      kind: 'response',
      response: { status: a.status, statusText: STATUS_CODES[a.status] ?? '', headers: [['content-length', '0']], body: empty.ref, trailers: [] },
    }
    return
  }
  if (x.outcome.kind !== 'response') {
    throw fail(`it has a recorded error (${x.outcome.error.code}); turn it into a response first with "response=CODE"`)
  }
  const res: RecordedResponse = x.outcome.response
  switch (a.kind) {
    case 'status':
      res.status = a.status
      res.statusText = STATUS_CODES[a.status] ?? ''
      return
    case 'header':
      res.headers = res.headers.filter(([k]) => k.toLowerCase() !== a.name)
      if (a.value !== null) res.headers.push([a.name, a.value])
      return
    case 'body': {
      const encoding = contentEncoding(res.headers)
      setBody(trace, res, a.bytes, encoding !== undefined)
      // The file is the body as the app should read it: sending it under the recorded coding would make the
      // client fail to decode it (Z_DATA_ERROR), so the coding goes.
      if (encoding !== undefined || headerValue(res.headers, 'content-length') !== undefined) note(lengthNote(res, encoding, 'stored as given'))
      return
    }
    case 'body-file':
      throw fail(`the file "${a.file}" was not read; call resolvePatchFile first`)
    case 'llm': {
      const out = applyLlmPatch(trace, x, r.patch.text, a)
      setBodyChunks(trace, res, out.chunks, out.decoded)
      return
    }
    case 'mcp': {
      const out = applyMcpPatch(trace, x, r.patch.text, a)
      setBodyChunks(trace, res, out.chunks, out.decoded)
      return
    }
    case 'realtime':
      applyRealtimePatch(trace, x, r.patch.text, a)
      return
    case 'json':
      patchJson(trace, res, a, fail, note)
      return
  }
}
