// The cold-start peer: talkback in replay mode (record DISABLED, tapes from argv[2]) in a fresh process.
import { createServer } from 'node:net'
import talkback from 'talkback'

const probe = createServer().listen(0, '127.0.0.1')
await new Promise((resolve) => probe.once('listening', resolve))
const { port } = probe.address()
await new Promise((resolve) => probe.close(resolve))
const server = talkback({
  host: 'http://127.0.0.1:9',
  port,
  path: process.argv[2],
  record: talkback.Options.RecordMode.DISABLED,
  fallbackMode: talkback.Options.FallbackMode.NOT_FOUND,
  allowHeaders: [],
  silent: true,
  summary: false,
})
await server.start()
process.stderr.write(`listening on http://127.0.0.1:${port}\n`)
