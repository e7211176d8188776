import { type BodyRef, bodyBytes, ErrorCodes, ToolReplayError, type Trace, tryUtf8 } from '../../trace/index.ts'
import { exchangeLine } from '../format.ts'
import { withExistingStore } from '../open-store.ts'
import type { CommandModule } from './command.ts'

/** `tr-proxy show TRACE [--exchange N]`: the exchanges of a trace, or one in full. */
export const showCommand: CommandModule = {
  command: 'show <trace>',
  describe: 'Show the exchanges of a trace; --exchange N shows one in full (headers and body)',
  builder: (y) =>
    y
      .positional('trace', { type: 'string', describe: 'Trace name' })
      .option('exchange', { type: 'number', describe: 'Sequence number of one exchange to show in full' }),
  run: async (args, io) =>
    withExistingStore(args, async (store) => {
      const trace = await store.readTrace(String(args.trace))
      const n = args.exchange as number | undefined
      if (n !== undefined && !(Number.isInteger(n) && n >= 0)) {
        throw new ToolReplayError(
          ErrorCodes.INVALID_OPTION,
          `Invalid --exchange ${String(args.exchange)}: give the sequence number of an exchange (0, 1, ...), as \`tr-proxy show ${String(args.trace)}\` lists them.`,
        )
      }
      if (n !== undefined) {
        const x = trace.exchanges.find((e) => e.seq === n)
        if (!x) {
          throw new ToolReplayError(
            ErrorCodes.INVALID_OPTION,
            `Trace "${trace.meta.name}" has no exchange #${n} (it has ${trace.exchanges.map((e) => `#${e.seq}`).join(', ') || 'none'}).`,
          )
        }
        if (args.json) io.out(JSON.stringify({ ok: true, exchange: x, bodies: bodiesOf(trace, x) }))
        else io.out(fullExchange(trace, x))
        return 0
      }
      if (args.json) io.out(JSON.stringify({ ok: true, meta: trace.meta, exchanges: trace.exchanges }))
      else io.out([`trace "${trace.meta.name}": ${trace.exchanges.length} exchange(s)`, ...trace.exchanges.map(exchangeLine)].join('\n'))
      return 0
    }),
}

function bodyText(trace: Trace, ref: BodyRef | null | undefined): string | undefined {
  if (!ref) return undefined
  const bytes = bodyBytes(trace, ref)
  return tryUtf8(bytes) ?? `<${bytes.byteLength} bytes of binary, sha256 ${ref.digest}>`
}

function bodiesOf(trace: Trace, x: Trace['exchanges'][number]) {
  return {
    request: bodyText(trace, x.request.body),
    response: bodyText(trace, x.outcome.kind === 'response' ? x.outcome.response.body : x.outcome.error.partial?.body),
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
  return lines.join('\n')
}
