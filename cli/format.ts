import { type Exchange, faultTag, headerValue, textTable } from '../trace/index.ts'

/** "1.2 KB" style sizes for tables. */
export function formatBytes(n: number): string {
  if (n < 1024) return `${n} B`
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KB`
  return `${(n / 1024 / 1024).toFixed(1)} MB`
}

/** One line per exchange: "#3 POST https://api.test/v1/x → 200 OK (1.2 KB, 4 chunks)". */
export function exchangeLine(x: Exchange): string {
  const req = `#${x.seq} ${x.request.method} ${x.request.url}`
  // " [fault response_lost, rule lost-ack; upstream 201]": what was injected and what the upstream really did.
  const tag = (x.origin === 'patched' ? ` [patched${x.patchId ? ` ${x.patchId}` : ''}]` : '') + (x.fault ? ` [${faultTag(x.fault)}]` : '')
  if (x.outcome.kind === 'response' && x.websocket) {
    // "→ 101 Switching Protocols (WebSocket: 3 client and 12 server messages, 48.2 KB; closed 1000)"
    const m = x.websocket.messages
    const client = m.filter((y) => y.from === 'client').length
    const bytes = m.reduce((n, y) => n + y.body.size, 0)
    const close = m.find((y) => y.close)?.close
    const end = x.websocket.end ? `; ended ${x.websocket.end.code}` : close ? `; closed ${close.code}` : ''
    return `${req} → ${x.outcome.response.status} ${x.outcome.response.statusText} (WebSocket: ${client} client and ${m.length - client} server messages, ${formatBytes(bytes)}${end})${tag}`
  }
  if (x.outcome.kind === 'response') {
    const r = x.outcome.response
    const enc = headerValue(r.headers, 'content-encoding')
    return `${req} → ${r.status} ${r.statusText} (${formatBytes(r.body.size)}${enc ? ` ${enc}` : ''}, ${r.body.chunks.length} chunk${r.body.chunks.length === 1 ? '' : 's'})${tag}`
  }
  const e = x.outcome.error
  return `${req} → ${e.code} during ${e.phase}${e.partial ? ` after ${e.partial.status} and ${formatBytes(e.partial.body.size)}` : ''}${tag}`
}

/** Pads columns of a small table. */
export const table = textTable
