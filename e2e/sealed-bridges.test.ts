/**
 * Sealed runs and the host: bridges (`--bridge PORT`, `--bridge NAME=ADDRESS:PORT`) reach host services live, even
 * in strict replay; loopback stays the command's own (a server it starts is reached there).
 */
import assert from 'node:assert/strict'
import { once } from 'node:events'
import { type AddressInfo, createServer as createNetServer } from 'node:net'
import { before, describe, test } from 'node:test'
import { cannotSeal, cli, emptyTrace, sealedWork } from './support/sealed-harness.ts'

let work: Awaited<ReturnType<typeof sealedWork>>
let skip: string | undefined

before(async () => {
  skip = await cannotSeal()
  work = await sealedWork('tr-sealed-bridges-')
})

/** A TCP echo server on the host's loopback, counting its connections. */
async function echoServer(): Promise<{ port: number; readonly connections: number; close(): Promise<void> }> {
  let connections = 0
  const server = createNetServer((s) => {
    connections++
    s.on('error', () => {})
    s.pipe(s)
  })
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  return {
    port: (server.address() as AddressInfo).port,
    get connections() {
      return connections
    },
    close: () => new Promise<void>((r) => server.close(() => r())),
  }
}

// Two bridged host services (by loopback port, by name) and a server of the command's own on its loopback.
const BRIDGED_AND_OWN = `
import net from 'node:net'
import http from 'node:http'
const echo = (port, host, text) => new Promise((resolve, reject) => {
  const s = net.connect(port, host, () => s.write(text))
  s.once('data', (d) => { resolve(String(d)); s.destroy() })
  s.once('error', reject)
})
const [loopbackPort] = process.argv.slice(1)
console.log('bridged port:', await echo(Number(loopbackPort), '127.0.0.1', 'one'))
console.log('bridged name:', await echo(5432, 'db.internal', 'two'))
const own = http.createServer((req, res) => res.end('own server ' + req.url))
await new Promise((r) => own.listen(0, '127.0.0.1', r))
// fetch honours the proxy variables; loopback is in NO_PROXY: it stays the command's own.
const r = await fetch('http://localhost:' + own.address().port + '/ping')
console.log('own loopback:', await r.text())
own.close()
`

describe('sealed runs: bridges to host services, and loopback that stays the command`s own', { timeout: 300_000 }, () => {
  test('--bridge PORT and --bridge NAME=ADDRESS:PORT reach host services live even in strict replay; a local server is reached on loopback', async (t) => {
    if (skip) return t.skip(skip)
    await emptyTrace(work.store)
    const byPort = await echoServer()
    const byName = await echoServer()
    try {
      const rep = await cli([
        'replay',
        '--store',
        work.store,
        '-t',
        'empty',
        '--strict',
        '--sealed',
        '--bridge',
        String(byPort.port),
        '--bridge',
        `db.internal=127.0.0.1:${byName.port}`,
        '--',
        process.execPath,
        '--input-type=module',
        '-e',
        BRIDGED_AND_OWN,
        String(byPort.port),
      ])
      assert.equal(rep.code, 0, rep.stderr)
      assert.equal(rep.stdout, 'bridged port: one\nbridged name: two\nown loopback: own server /ping\n')
      assert.deepEqual([byPort.connections, byName.connections], [1, 1])
      assert.match(rep.stderr, /0 replayed, 0 recorded, 0 passed through; 0 unmatched/)
    } finally {
      await byPort.close()
      await byName.close()
    }
  })

  test('--bridge without --sealed is refused before anything runs', async () => {
    await emptyTrace(work.store)
    const run = await cli(['replay', '--store', work.store, '-t', 'empty', '--bridge', '5432', '--', 'true'])
    assert.equal(run.code, 64, run.stderr)
    assert.match(run.stderr, /TR_INVALID_OPTION: --bridge reaches a host service from a sealed run: add --sealed, or drop --bridge\./)
  })
})
