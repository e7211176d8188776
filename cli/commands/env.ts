import {
  assertSessionName,
  DEFAULT_PROXY_PORT,
  formatExports,
  loadCertificateAuthority,
  proxyEnvironment,
  SESSION_PASSWORD,
  writeCaBundle,
} from '../../proxy/index.ts'
import { storeDir } from '../open-store.ts'
import type { CommandModule } from './command.ts'

/** `tr-proxy env [--port N] [--host H] [--session NAME]`: `export` lines routing a shell through a running proxy (or one of its sessions). */
export const envCommand: CommandModule = {
  command: 'env',
  describe: 'Print export lines for eval "$(tr-proxy env)": proxy variables, NO_PROXY cleared, and the CA for Node, curl, Python and Go',
  builder: (y) =>
    y
      .option('port', { alias: 'p', type: 'number', default: DEFAULT_PROXY_PORT, describe: 'Port of the running proxy' })
      .option('host', { type: 'string', default: '127.0.0.1', describe: 'Host of the running proxy' })
      .option('session', { type: 'string', describe: 'A named session on that proxy: the proxy URL carries it (http://NAME:x@host:port)' }),
  run: async (args, io) => {
    const dir = storeDir({ store: args.store })
    // Makes the CA on first use, so `env` works before the proxy ever ran.
    const ca = await loadCertificateAuthority(dir)
    const bundlePath = await writeCaBundle(dir, ca)
    const host = String(args.host)
    const session = typeof args.session === 'string' ? args.session : undefined
    if (session !== undefined) assertSessionName(session)
    const proxyUrl = `http://${session ? `${session}:${SESSION_PASSWORD}@` : ''}${host.includes(':') ? `[${host}]` : host}:${Number(args.port)}`
    const env = proxyEnvironment({ proxyUrl, caPath: ca.certPath, bundlePath })
    io.out(args.json ? JSON.stringify({ ok: true, env }) : formatExports(env))
    return 0
  },
}
