// The cold-start limit: a bare node:http server in a fresh process, answering GET /kb with 1 KB.
import { createServer } from 'node:http'

const body = Buffer.alloc(1024, 'x')
const server = createServer((_req, res) => {
  res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': String(body.byteLength) })
  res.end(body)
})
server.listen(0, '127.0.0.1', () => process.stderr.write(`listening on http://127.0.0.1:${server.address().port}\n`))
process.on('SIGINT', () => server.close(() => process.exit(0)))
