import {
  type BodyRef,
  bodyBytes,
  ErrorCodes,
  formatModelTurn,
  formatTimeline,
  llmTimeline,
  presentLlmView,
  type TimelineTurn,
  ToolReplayError,
  type Trace,
  tryUtf8,
} from '../../trace/index.ts'
import { exchangeLine } from '../format.ts'
import { withReadOnlyStore } from '../open-store.ts'
import type { CommandModule } from './command.ts'

/** `tr-proxy show TRACE [--exchange N] [--view llm|http]`: the exchanges of a trace, or one in full. */
export const showCommand: CommandModule = {
  command: 'show <trace>',
  describe: 'Show a trace: model turns as a timeline (LLM view) or one line per exchange; --exchange N shows one in full',
  builder: (y) =>
    y
      .positional('trace', { type: 'string', describe: 'Trace name' })
      .option('exchange', { type: 'number', describe: 'Sequence number of one exchange to show in full' })
      .option('partial', { type: 'boolean', default: false, describe: 'Show the newest recording of that name that never completed' })
      .option('view', {
        choices: ['llm', 'http'] as const,
        describe: 'llm: model calls read as model turns (the default when the trace has any); http: the raw exchanges',
      }),
  run: async (args, io) =>
    withReadOnlyStore(args, async (store) => {
      const trace = await store.readTrace(String(args.trace), { partial: args.partial === true })
      const n = args.exchange as number | undefined
      if (n !== undefined && !(Number.isInteger(n) && n >= 0)) {
        throw new ToolReplayError(
          ErrorCodes.INVALID_OPTION,
          `Invalid --exchange ${String(args.exchange)}: give the sequence number of an exchange (0, 1, ...), as \`tr-proxy show ${String(args.trace)}\` lists them.`,
        )
      }
      const asked = args.view as 'llm' | 'http' | undefined
      const turns = asked === 'http' ? [] : llmTimeline(trace)
      if (n !== undefined) {
        const x = trace.exchanges.find((e) => e.seq === n)
        if (!x) {
          throw new ToolReplayError(
            ErrorCodes.INVALID_OPTION,
            `Trace "${trace.meta.name}" has no exchange #${n} (it has ${trace.exchanges.map((e) => `#${e.seq}`).join(', ') || 'none'}).`,
          )
        }
        const turn = turns.find((t) => t.seq === n)
        if (turn?.llm) {
          if (args.json) io.out(JSON.stringify({ ok: true, view: 'llm', turn: presentTurn(turn) }))
          else io.out(formatModelTurn(turn))
          return 0
        }
        const note = asked === 'llm' ? `(#${n} is not a model call Tool Replay reads: showing the HTTP view)\n` : ''
        if (args.json) io.out(JSON.stringify({ ok: true, view: 'http', exchange: x, bodies: bodiesOf(trace, x) }))
        else io.out(`${note}${fullExchange(trace, x)}`)
        return 0
      }
      if (turns.some((t) => t.kind === 'model')) {
        if (args.json) io.out(JSON.stringify({ ok: true, view: 'llm', meta: trace.meta, turns: turns.map(presentTurn) }))
        else io.out(formatTimeline(trace.meta.name, turns))
        return 0
      }
      if (args.json) io.out(JSON.stringify({ ok: true, view: 'http', meta: trace.meta, exchanges: trace.exchanges }))
      else io.out([`trace "${trace.meta.name}": ${trace.exchanges.length} exchange(s)`, ...trace.exchanges.map(exchangeLine)].join('\n'))
      return 0
    }),
}

/** A turn for JSON output: long input messages cut (the inspector reads this). */
function presentTurn(t: TimelineTurn): TimelineTurn {
  return t.llm ? { ...t, llm: presentLlmView(t.llm) } : t
}

function bodyText(trace: Trace, ref: BodyRef | null | undefined): string | undefined {
  if (!ref) return undefined
  const bytes = bodyBytes(trace, ref)
  return tryUtf8(bytes) ?? `<${bytes.byteLength} bytes of binary, sha256 ${ref.digest}>`
}

function bodiesOf(trace: Trace, x: Trace['exchanges'][number]) {
  const u = x.fault?.upstream
  return {
    request: bodyText(trace, x.request.body),
    response: bodyText(trace, x.outcome.kind === 'response' ? x.outcome.response.body : x.outcome.error.partial?.body),
    // A faulted exchange: what the upstream really sent, next to what the app got.
    ...(u ? { upstream: bodyText(trace, u.kind === 'response' ? u.response.body : u.error.partial?.body) } : {}),
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
