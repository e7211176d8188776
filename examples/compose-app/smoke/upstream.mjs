// The smoke test's upstream: a plain HTTP service on the compose network, stopped before the replay.
import http from 'node:http'

let n = 0
http
  .createServer((req, res) => {
    n++
    res.writeHead(200, { 'content-type': 'text/plain' })
    res.end(`hello from upstream, request ${n} to ${req.url}\n`)
  })
  .listen(8081, '0.0.0.0')
