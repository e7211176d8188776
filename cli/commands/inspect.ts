import { resolve } from 'node:path'
import { FAULTS_FILE_ENV, FAULTS_OPTIONS, readFaultsFile } from '../../faults/index.ts'
import { waitForStop } from '../../proxy/index.ts'
import { ErrorCodes, optionsFromFlags, ToolReplayError } from '../../trace/index.ts'
import { declareOptions } from '../declared-options.ts'
import { storeDir, withExistingStore } from '../open-store.ts'
import type { CommandModule } from './command.ts'

/** `tr-proxy inspect [TRACE]`: the local evidence console, served until Ctrl-C. */
export const inspectCommand: CommandModule = {
  command: 'inspect [trace]',
  describe: 'Open the inspector: a local page over the store (runs, model turns, exchanges, compare, fork and rerun, the fault lab)',
  builder: (y) =>
    declareOptions(y, FAULTS_OPTIONS, ['contracts'])
      .positional('trace', { type: 'string', describe: 'Open this run first' })
      .option('port', { alias: 'p', type: 'number', default: 0, describe: 'Port (0 = any free port)' })
      .option('host', {
        type: 'string',
        default: '127.0.0.1',
        describe: 'Interface to bind; anything but loopback exposes the store to the network (a warning is printed)',
      })
      .option('open', { type: 'boolean', default: false, describe: 'Open the page in the default browser' })
      .option('cases', { type: 'string', default: 'test/cases', describe: '"Promote to test" writes cases here' }),
  run: async (args, io) => {
    const port = args.port as number
    if (!(Number.isInteger(port) && port >= 0 && port <= 65535)) {
      throw new ToolReplayError(ErrorCodes.INVALID_OPTION, `Invalid --port ${String(args.port)}: use a whole number from 0 to 65535 (0 = any free port).`)
    }
    const file = optionsFromFlags(FAULTS_OPTIONS, args).contracts || process.env[FAULTS_FILE_ENV]
    const contracts = file ? await readFaultsFile(resolve(file)) : undefined
    const host = String(args.host)
    // Loaded here, not with the CLI: the inspector brings the lab, cases and the page's server, which no other command needs.
    const { startInspector } = await import('../../inspector/index.ts')
    return withExistingStore(args, async (store) => {
      const inspector = await startInspector({
        store,
        storeDir: storeDir(args),
        host,
        port,
        casesDir: resolve(String(args.cases)),
        ...(contracts ? { contracts } : {}),
      })
      if (!['127.0.0.1', '::1', 'localhost'].includes(host)) {
        io.err(`WARNING: the inspector listens on ${host}: anyone who can reach it and has the token can read every trace and rerun recorded commands.`)
      }
      const first = typeof args.trace === 'string' ? `#/run/${encodeURIComponent(args.trace)}` : ''
      const url = `${inspector.url}${first}`
      if (args.json) io.out(JSON.stringify({ ok: true, url, port: inspector.port, store: store.location }))
      else io.out(`Tool Replay inspector: ${url}\nStore: ${store.location}. Stop with Ctrl-C.`)
      if (args.open) openBrowser(url)
      await waitForStop()
      await inspector.close()
      return 0
    })
  },
}

function openBrowser(url: string): void {
  const opener = process.platform === 'darwin' ? 'open' : process.platform === 'win32' ? 'explorer' : 'xdg-open'
  void import('node:child_process').then(({ spawn }) => {
    const child = spawn(opener, [url], { stdio: 'ignore', detached: true })
    child.on('error', () => {})
    child.unref()
  })
}
