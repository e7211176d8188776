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
