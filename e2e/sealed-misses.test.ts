/**
 * Sealed strict replay of what a trace cannot answer: an HTTP call missing from it (curl --noproxy, Python
 * requests with trust_env=False), a database's startup message, a client of a server-speaks-first protocol that
 * sends nothing, a UDP datagram: exit 69, each named by host and port in the summary, none hanging past 5 s.
 */
import assert from 'node:assert/strict'
import { before, describe, test } from 'node:test'
import { cannotSeal, cli, emptyTrace, has, REPLAY_CONTRACT_EXIT, sealedWork } from './support/sealed-harness.ts'

let work: Awaited<ReturnType<typeof sealedWork>>
let skip: string | undefined

before(async () => {
  skip = await cannotSeal()
  work = await sealedWork('tr-sealed-misses-')
})

// Each connection a sealed strict replay cannot answer: a database's startup message, a server-speaks-first
// client that sends nothing, a datagram. Each prints how long until its connection was closed.
const RAW_CLIENTS = `
import net from 'node:net'
import dgram from 'node:dgram'
const closedAfter = (socket, label, t0) => new Promise((resolve) => {
  socket.on('error', () => {})
  socket.on('close', () => { process.stdout.write(label + ' closed after ' + (Date.now() - t0) + ' ms\\n'); resolve() })
})
const t0 = Date.now()
const pg = net.connect(5432, 'db.internal', () => pg.write(Buffer.from([0, 0, 0, 8, 4, 0xd2, 0x16, 0x2f])))
const mysql = net.connect(3306, 'mysql.internal')
const h2c = net.connect(8080, 'h2c.internal', () => h2c.write('PRI * HTTP/2.0\\r\\n\\r\\nSM\\r\\n\\r\\n'))
const udp = dgram.createSocket('udp4')
udp.send('ping', 123, '198.51.100.7', () => udp.close())
await Promise.all([closedAfter(pg, 'postgres', t0), closedAfter(mysql, 'mysql', t0), closedAfter(h2c, 'h2c', t0)])
`

const PYTHON_MISS = `
import os, requests
s = requests.Session()
s.trust_env = False
try:
    r = s.get('https://api.test:8443/missing', timeout=20, verify=os.environ['SSL_CERT_FILE'])
    print('python got', r.status_code)
except Exception as e:
    print('python failed', type(e).__name__)
`

describe('sealed strict replay: what the trace cannot answer fails the run, naming host and port', { timeout: 300_000 }, () => {
  before(async () => {
    if (!skip) await emptyTrace(work.store)
  })

  test('an HTTP call missing from the trace, a database, HTTP/2 without TLS, a silent server-speaks-first client and UDP: exit 69, each named, none hangs', async (t) => {
    if (skip) return t.skip(skip)
    const python = has('python3', ['-c', 'import requests']) === undefined
    const script = [
      "curl -sS --noproxy '*' -o /dev/null -w 'curl got %{http_code}\\n' http://plain.test:8080/missing",
      `${process.execPath} --input-type=module -e "$RAW"`,
      ...(python ? ['python3 -c "$PY"'] : []),
    ].join('; ')
    const rep = await cli(['replay', '--store', work.store, '-t', 'empty', '--sealed', '--', 'sh', '-c', script], { RAW: RAW_CLIENTS, PY: PYTHON_MISS })
    assert.equal(rep.code, REPLAY_CONTRACT_EXIT, rep.stderr)
    assert.match(rep.stdout, /curl got 403/, 'curl got the refusal')
    assert.match(rep.stderr, /TR_REPLAY_MISS GET http:\/\/plain\.test:8080\/missing/)
    assert.match(rep.stderr, /TR_REPLAY_MISS TCP db\.internal:5432 \(PostgreSQL's port; not HTTP or TLS; first bytes 00 00 00 08 04 d2 16 2f\)/)
    assert.match(rep.stderr, /TR_REPLAY_MISS TCP mysql\.internal:3306 \(MySQL's port; sent nothing for 2 s: a protocol whose server speaks first\)/)
    assert.match(rep.stderr, /TR_REPLAY_MISS UDP 198\.51\.100\.7:123 \(UDP, not DNS\)/)
    assert.match(rep.stderr, /TR_REPLAY_MISS TCP h2c\.internal:8080 \(HTTP\/2 without TLS \(prior knowledge\), which sealed runs do not capture\)/)
    if (python) {
      assert.match(rep.stdout, /python got 403/)
      assert.match(rep.stderr, /TR_REPLAY_MISS GET https:\/\/api\.test:8443\/missing/)
    }
    for (const m of rep.stdout.matchAll(/(postgres|mysql|h2c) closed after (\d+) ms/g)) assert.ok(Number(m[2]) < 5000, `${m[1]} waited ${m[2]} ms`)
    assert.equal([...rep.stdout.matchAll(/closed after/g)].length, 3, rep.stdout)
  })
})
