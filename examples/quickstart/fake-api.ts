import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'

/**
 * A stand-in for the real APIs, on loopback. It answers differently on every call (like a model
 * does), so a replay that returned anything but the recording would show.
 */
export async function startFakeApi(): Promise<{ url: string; close: () => Promise<void> }> {
  let calls = 0
  const server: Server = createServer((req, res) => {
    calls++
    if (req.url?.startsWith('/forecast')) {
      res.setHeader('content-type', 'application/json')
      res.end(JSON.stringify({ rain: 60 + calls }))
      return
    }
    let body = ''
    req.on('data', (c) => (body += c))
    req.on('end', () => {
      res.setHeader('content-type', 'application/json')
      res.end(
        JSON.stringify({
          id: `chatcmpl-${Date.now()}`,
          choices: [{ index: 0, message: { role: 'assistant', content: `Take an umbrella (answer #${calls}).` } }],
        }),
      )
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as AddressInfo
  let closed: Promise<void> | undefined
  return {
    url: `http://127.0.0.1:${port}`,
    close: () =>
      (closed ??= new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      })),
  }
}
