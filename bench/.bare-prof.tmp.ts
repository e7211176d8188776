import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { createServer } from 'node:http'
import { join } from 'node:path'
const N = Number(process.env.N ?? 40000)
const BODY = Buffer.alloc(1024, 'x')
const HEADERS: Array<[string, string]> = [['content-type', 'application/octet-stream'], ['content-length', '1024']]
const server = createServer((_req, res) => { res.writeHead(200, HEADERS); res.end(BODY) })
server.listen(0, '127.0.0.1')
await once(server, 'listening')
const port = (server.address() as import('node:net').AddressInfo).port
const child = spawn(process.execPath, [join(import.meta.dirname, 'proxy-bench.ts'), '--autocannon-child', JSON.stringify({ url: `http://127.0.0.1:${port}`, path: '/kb', amount: N })], { stdio: ['ignore', 'pipe', 'inherit'] })
let out = ''
child.stdout.on('data', (c) => (out += c))
await once(child, 'exit')
console.log(out)
server.close(); server.closeAllConnections()
