import { bodyRefs, type TraceReader } from '../../store/index.ts'
import {
  type BodyRef,
  bodyBytes,
  ErrorCodes,
  type Exchange,
  formatAppRun,
  formatGrpcBody,
  formatModelTurn,
  formatTimeline,
  formatToolTurn,
  formatTurnLine,
  type HeaderPairs,
  headerValue,
  isGrpcContentType,
  linkTurn,
  presentLlmView,
  type TimelineTurn,
  ToolReplayError,
  type Trace,
  tryUtf8,
  turnOf,
} from '../../trace/index.ts'
import { exchangeLine } from '../format.ts'
import { withReadOnlyStore } from '../open-store.ts'
import type { Io } from '../output.ts'
import type { CommandModule } from './command.ts'

/** Exchanges read (and printed) at a time: memory stays at one page whatever the trace's size. */
const PAGE = 1000
/** Bodies over this size are not read to find model turns (a model call's JSON is far smaller). */
const TURN_BODY_MAX = 16 * 1024 * 1024

/** `tr-proxy show TRACE [--exchange N] [--from SEQ] [--limit N] [--view llm|http]`: a trace, a page at a time. */
export const showCommand: CommandModule = {
  command: 'show <trace>',
  describe:
    'Show a trace: model turns as a timeline (LLM view) or one line per exchange, read a page at a time (--from, --limit); --exchange N shows one in full',
  builder: (y) =>
    y
      .positional('trace', { type: 'string', describe: 'Trace name' })
      .option('exchange', { type: 'number', describe: 'Sequence number of one exchange to show in full' })
      .option('from', { type: 'number', describe: 'First exchange (sequence number) to list' })
      .option('limit', { type: 'number', describe: 'List at most this many exchanges' })
      .option('partial', { type: 'boolean', default: false, describe: 'Show the newest recording of that name that never completed' })
      .option('view', {
        choices: ['llm', 'http'] as const,
        describe: 'llm: model calls read as model turns (the default when the trace has any); http: the raw exchanges',
      }),
  run: async (args, io) =>
    withReadOnlyStore(args, async (store) => {
      const reader = await store.openTrace(String(args.trace), { partial: args.partial === true })
      const asked = args.view as 'llm' | 'http' | undefined
      const n = args.exchange as number | undefined
      if (n !== undefined) return showOne(reader, wholeNumber(args, 'exchange', n), asked, Boolean(args.json), io)
      const from = args.from === undefined ? 0 : wholeNumber(args, 'from', args.from)
      const limit = args.limit === undefined ? Number.POSITIVE_INFINITY : wholeNumber(args, 'limit', args.limit)
      return listPages(reader, from, limit, asked, Boolean(args.json), io)
    }),
}

function wholeNumber(args: Record<string, unknown>, option: string, value: unknown): number {
  if (typeof value === 'number' && Number.isInteger(value) && value >= 0) return value
  const what = option === 'exchange' ? 'the sequence number of an exchange (0, 1, ...)' : 'a whole number, 0 or more'
  throw new ToolReplayError(
    ErrorCodes.INVALID_OPTION,
    `Invalid --${option} ${String(value)}: give ${what}, as \`tr-proxy show ${String(args.trace)}\` lists them.`,
  )
}

/** One exchange in full, with only its own bodies read. */
async function showOne(reader: TraceReader, n: number, asked: 'llm' | 'http' | undefined, json: boolean, io: Io): Promise<number> {
  const [x] = await pageOf(reader, n, 1)
  if (x === undefined || x.seq !== n) {
    throw new ToolReplayError(
      ErrorCodes.INVALID_OPTION,
      `Trace "${reader.name}" has no exchange #${n} (it has ${reader.info.count} exchange(s); \`tr-proxy show ${reader.name}\` lists them).`,
    )
  }
  const trace = await withBodies(reader, [x], Number.POSITIVE_INFINITY)
  const turn = asked === 'http' ? undefined : turnOf(trace, x)
  if (turn?.llm) {
    if (json) io.out(JSON.stringify({ ok: true, view: 'llm', turn: presentTurn(turn) }))
    else io.out(formatModelTurn(turn))
    return 0
  }
  if (turn?.mcp) {
    if (json) io.out(JSON.stringify({ ok: true, view: 'llm', turn }))
    else io.out(formatToolTurn(turn.seq, turn.method, turn.url, turn.mcp))
    return 0
  }
  const note = asked === 'llm' ? `(#${n} is not a model call Tool Replay reads: showing the HTTP view)\n` : ''
  if (json) io.out(JSON.stringify({ ok: true, view: 'http', exchange: x, bodies: bodiesOf(trace, x) }))
  else io.out(`${note}${fullExchange(trace, x)}`)
  return 0
}

/**
 * The listing, printed page by page (a trace of a million exchanges is never held whole). The view is decided
 * by the first page: the LLM timeline when it has a model turn (or --view llm), else one line per exchange.
 */
async function listPages(reader: TraceReader, from: number, limit: number, asked: 'llm' | 'http' | undefined, json: boolean, io: Io): Promise<number> {
  const names = new Map<string, string>()
  let view: 'llm' | 'http' | undefined = asked === 'http' ? 'http' : undefined
  let shown = 0
  let previousModel: string | undefined
  let ended = false
  for (let next = from; shown < limit; ) {
    const want = Math.min(PAGE, limit - shown)
    const page = await pageOf(reader, next, want)
    const turns: TimelineTurn[] = view === 'http' ? [] : await turnsOf(reader, page, names)
    // Model turns and MCP tool turns are read in model terms.
    if (view === undefined) view = asked ?? (turns.some((t) => t.kind !== 'http') ? 'llm' : 'http')
    const whole = shown === 0 && page.length < PAGE && from === 0 && limit === Number.POSITIVE_INFINITY
    if (whole) {
      printWhole(reader, page, turns, view, json, io)
      return 0
    }
    if (shown === 0) printHead(reader, view, from, json, io)
    if (json) io.out(`${shown === 0 ? '' : ','}${(view === 'llm' ? turns.map(presentTurn) : page).map((v: unknown) => JSON.stringify(v)).join(',')}`)
    else if (view === 'llm') {
      const lines: string[] = []
      for (const t of turns) {
        lines.push(formatTurnLine(t, previousModel))
        if (t.llm?.model !== undefined) previousModel = t.llm.model
      }
      io.out(lines.join('\n'))
    } else io.out(page.map(exchangeLine).join('\n'))
    shown += page.length
    // A short page is the end of the trace.
    if (page.length < want) {
      ended = true
      break
    }
    next = (page.at(-1) as Exchange).seq + 1
  }
  if (shown === 0) printHead(reader, view ?? 'http', from, json, io)
  if (json) io.out(']}')
  // What the app did with the run ends the listing that reached the trace's end.
  else if (ended && reader.info.meta.app) io.out(formatAppRun(reader.info.meta.app))
  return 0
}

/** A trace that fits one page, printed as it always was (the LLM view's header counts its model turns). */
function printWhole(reader: TraceReader, page: Exchange[], turns: TimelineTurn[], view: 'llm' | 'http', json: boolean, io: Io): void {
  const meta = reader.info.meta
  if (view === 'llm') {
    if (json) io.out(JSON.stringify({ ok: true, view: 'llm', meta, turns: turns.map(presentTurn) }))
    else io.out(withApp(meta, formatTimeline(meta.name, turns)))
  } else if (json) io.out(JSON.stringify({ ok: true, view: 'http', meta, exchanges: page }))
  else io.out(withApp(meta, [`trace "${meta.name}": ${page.length} exchange(s)`, ...page.map(exchangeLine)].join('\n')))
}

/** The run's text, then what the app did with it (a run of `record|replay -- <command>`). */
function withApp(meta: Trace['meta'], text: string): string {
  return meta.app ? `${text}\n${formatAppRun(meta.app)}` : text
}

function printHead(reader: TraceReader, view: 'llm' | 'http', from: number, json: boolean, io: Io): void {
  const meta = reader.info.meta
  if (json) io.out(`{"ok":true,"view":"${view}","meta":${JSON.stringify(meta)},"${view === 'llm' ? 'turns' : 'exchanges'}":[`)
  else io.out(`trace "${meta.name}": ${reader.info.count} exchange(s)${from > 0 ? `, from #${from}` : ''}`)
}

async function pageOf(reader: TraceReader, from: number, limit: number): Promise<Exchange[]> {
  return limit <= 0 ? [] : reader.page(from, limit)
}

/** The page as timeline turns; tool results are named from the tool calls of earlier turns, across pages. */
async function turnsOf(reader: TraceReader, page: Exchange[], names: Map<string, string>): Promise<TimelineTurn[]> {
  // Only a POST or a WebSocket session (OpenAI Realtime) can be a model call; its bodies are read (verified) to see.
  const trace = await withBodies(
    reader,
    page.filter((x) => x.request.method.toUpperCase() === 'POST' || x.websocket !== undefined),
    TURN_BODY_MAX,
  )
  return page.map((x) => linkTurn(turnOf(trace, x), names))
}

/** The exchanges with their bodies read and verified (bodies over `max` bytes left out). */
async function withBodies(reader: TraceReader, exchanges: Exchange[], max: number): Promise<Trace> {
  const bodies = new Map<string, Uint8Array>()
  for (const x of exchanges) {
    for (const [ref, use] of bodyRefs(x)) {
      if (!bodies.has(ref.digest) && ref.size <= max) bodies.set(ref.digest, await reader.bodyBytes(ref, use))
    }
  }
  return { meta: reader.info.meta, exchanges, bodies }
}

/** A turn for JSON output: long input messages cut (the inspector reads this). */
function presentTurn(t: TimelineTurn): TimelineTurn {
  return t.llm ? { ...t, llm: presentLlmView(t.llm) } : t
}

function bodyText(trace: Trace, ref: BodyRef | null | undefined, headers: HeaderPairs | undefined): string | undefined {
  if (!ref) return undefined
  const bytes = bodyBytes(trace, ref)
  // gRPC: the length-prefixed messages one by one, not one blob.
  if (headers && isGrpcContentType(headerValue(headers, 'content-type'))) return formatGrpcBody(bytes, headers)
  return tryUtf8(bytes) ?? `<${bytes.byteLength} bytes of binary, sha256 ${ref.digest}>`
}

function bodiesOf(trace: Trace, x: Trace['exchanges'][number]) {
  const u = x.fault?.upstream
  const head = x.outcome.kind === 'response' ? x.outcome.response : x.outcome.error.partial
  const upstreamHead = u?.kind === 'response' ? u.response : u?.error.partial
  return {
    request: bodyText(trace, x.request.body, x.request.headers),
    response: bodyText(trace, head?.body, head?.headers),
    // A faulted exchange: what the upstream really sent, next to what the app got.
    ...(u ? { upstream: bodyText(trace, upstreamHead?.body, upstreamHead?.headers) } : {}),
  }
}

function fullExchange(trace: Trace, x: Trace['exchanges'][number]): string {
  const lines = [exchangeLine(x), '', `> ${x.request.method} ${x.request.url}`]
  for (const [k, v] of x.request.headers) lines.push(`> ${k}: ${v}`)
  const b = bodiesOf(trace, x)
  if (b.request !== undefined) lines.push('>', b.request)
  lines.push('')
  const head = x.outcome.kind === 'response' ? x.outcome.response : x.outcome.error.partial
  if (head) {
    lines.push(`< ${head.status} ${head.statusText}`)
    for (const [k, v] of head.headers) lines.push(`< ${k}: ${v}`)
  }
  if (x.outcome.kind === 'error') lines.push(`! ${x.outcome.error.code} (${x.outcome.error.phase}): ${x.outcome.error.message}`)
  if (b.response !== undefined) lines.push('<', b.response)
  // Trailers (gRPC's status among them) after the body, as they came.
  for (const [k, v] of head && 'trailers' in head ? head.trailers : []) lines.push(`< (trailer) ${k}: ${v}`)
  const f = x.fault
  if (!f) return lines.join('\n')
  const key = f.key !== undefined ? ` of key ${JSON.stringify(f.key)}` : ''
  lines.push('', `fault ${f.kind} (rule ${f.rule}, ${f.phase}, call ${f.call}${key}, seed ${f.seed}): the app got the above`)
  const u = f.upstream
  if (u === null) {
    lines.push('upstream: not forwarded (the request never left)')
    return lines.join('\n')
  }
  lines.push('upstream really answered:')
  const uh = u.kind === 'response' ? u.response : u.error.partial
  if (uh) {
    lines.push(`u< ${uh.status} ${uh.statusText}`)
    for (const [k, v] of uh.headers) lines.push(`u< ${k}: ${v}`)
  }
  if (u.kind === 'error') lines.push(`u! ${u.error.code} (${u.error.phase}): ${u.error.message}`)
  if (b.upstream !== undefined) lines.push('u<', b.upstream)
  return lines.join('\n')
}
