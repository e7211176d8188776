import { loadCertificateAuthority } from '../../proxy/index.ts'
import { storeDir } from '../open-store.ts'
import type { CommandModule } from './command.ts'

/** `tr-proxy ca [--path]`: the proxy CA certificate (PEM), made on first use. */
export const caCommand: CommandModule = {
  command: 'ca',
  describe: 'Print the proxy CA certificate (PEM) to trust in clients; --path prints its file instead. The key never leaves <store>/ca/',
  builder: (y) => y.option('path', { type: 'boolean', default: false, describe: 'Print the path of ca.pem instead of its contents' }),
  run: async (args, io) => {
    const ca = await loadCertificateAuthority(storeDir({ store: args.store }))
    if (args.json) io.out(JSON.stringify({ ok: true, path: ca.certPath, pem: ca.certPem }))
    else io.out(args.path ? ca.certPath : ca.certPem.trimEnd())
    return 0
  },
}
