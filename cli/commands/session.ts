import { formatSummary, SESSION_OPTIONS, type SessionSummary } from '../../engine/index.ts'
import { controlCall, controlSocketPath, DEFAULT_PROXY_PORT, type NamedSessionStatus } from '../../proxy/index.ts'
import { ErrorCodes, optionsFromFlags, ToolReplayError } from '../../trace/index.ts'
import { declareOptions } from '../declared-options.ts'
import { EXIT_CODES } from '../exit-codes.ts'
import { table } from '../format.ts'
import { storeDir } from '../open-store.ts'
import type { CommandModule } from './command.ts'

/**
 * `tr-proxy session open|close|ls [NAME]`: named sessions on a running `tr-proxy serve`, through its control
 * socket (`<store>/proxy-control-<port>.sock`). `open` prints the proxy URL that selects the session.
 */
export const sessionCommand: CommandModule = {
  command: 'session <action> [name]',
  describe: `Open, close or list named sessions on a running \`tr-proxy serve\` (its own trace, mode and strict ledger each); open prints the proxy URL that selects it (http://NAME:x@host:port), close its summary (exit ${EXIT_CODES[ErrorCodes.REPLAY_INCOMPLETE]} when a strict replay saw a problem)`,
  builder: (y) =>
    declareOptions(y, SESSION_OPTIONS, ['trace', 'mode', 'recordAs'], {
      trace: { default: undefined, note: 'open: default the session name' },
      mode: { default: 'replay', note: 'open' },
      recordAs: { note: 'open' },
    })
      .positional('action', { choices: ['open', 'close', 'ls'], describe: 'open NAME, close NAME, or ls' })
      .positional('name', { type: 'string', describe: 'Session name (letters, digits, . _ -)' })
      .option('port', { alias: 'p', type: 'number', default: DEFAULT_PROXY_PORT, describe: 'Port of the running serve (names its control socket)' }),
  run: async (args, io) => {
    const socket = controlSocketPath(storeDir({ store: args.store }), Number(args.port))
    const action = String(args.action)
    const name = typeof args.name === 'string' ? args.name : undefined
    if (action !== 'ls' && !name) throw new ToolReplayError(ErrorCodes.INVALID_OPTION, `\`tr-proxy session ${action}\` needs a session name.`)
    if (action === 'open') {
      const { trace, mode, recordAs } = optionsFromFlags(SESSION_OPTIONS, args)
      const body = { name, mode, trace, recordAs }
      const s = (await controlCall(socket, 'POST', '/sessions', body)).session as NamedSessionStatus
      io.out(args.json ? JSON.stringify({ ok: true, session: s }) : s.proxy)
      if (!args.json)
        io.err(`session "${s.name}": ${s.mode} of trace "${s.trace}"; select it with HTTPS_PROXY=${s.proxy} or the header ${s.header.name}: ${s.name}`)
      return 0
    }
    if (action === 'close') {
      const answer = await controlCall(socket, 'DELETE', `/sessions/${encodeURIComponent(name as string)}`)
      const summary = answer.summary as SessionSummary
      io.out(args.json ? JSON.stringify(answer) : formatSummary(summary))
      return summary.mode === 'replay' && !summary.ok ? EXIT_CODES[ErrorCodes.REPLAY_INCOMPLETE] : 0
    }
    const sessions = (await controlCall(socket, 'GET', '/sessions')).sessions as NamedSessionStatus[]
    if (args.json) io.out(JSON.stringify({ ok: true, sessions }))
    else if (sessions.length === 0) io.out('No named sessions are open on this serve.')
    else io.out(table([['NAME', 'MODE', 'TRACE', 'PROXY URL'], ...sessions.map((s) => [s.name, s.mode, s.trace, s.proxy])]))
    return 0
  },
}
