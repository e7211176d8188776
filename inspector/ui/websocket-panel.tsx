/** A WebSocket session's messages in the exchange panel: one row each, both ways, in the order they came. */
import { bytes, ms } from './format.ts'
import type { WebSocketFrameView, WebSocketView } from './types.ts'

/** What a message's last column shows: a close's code and reason, its text, or its first bytes in hex. */
function content(m: WebSocketFrameView) {
  if (m.opcode === 'close') return m.close ? `${m.close.code}${m.close.reason ? ` ${m.close.reason}` : ''}` : '(no code)'
  if (m.text !== undefined) return `${m.text}${m.truncated ? ' …' : ''}`
  if (m.hex !== undefined) return `${m.hex.replace(/(..)/g, '$1 ')}${m.size * 2 > m.hex.length ? '…' : ''}`
  return ''
}

export function WebSocketPanel({ v }: { v: WebSocketView }) {
  const client = v.messages.filter((m) => m.from === 'client').length
  return (
    <div data-testid="websocket-messages">
      <p class="muted small">
        {v.total} message{v.total === 1 ? '' : 's'}: {client} from the client (→), {v.messages.length - client} from the server (←)
        {v.total > v.messages.length ? ` · the first ${v.messages.length} shown` : ''}
      </p>
      <table class="events websocket">
        <tbody>
          {v.messages.map((m, i) => (
            <tr key={i} data-testid="websocket-message" class={m.from}>
              <td class="muted">#{i}</td>
              <td title={m.from}>{m.from === 'client' ? '→' : '←'}</td>
              <td class="muted">{ms(m.atMs)}</td>
              <td>{m.opcode}</td>
              <td class="muted">
                {bytes(m.size)}
                {m.frames > 1 ? ` · ${m.frames} frames` : ''}
              </td>
              <td class="data">
                <code>{content(m)}</code>
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      {v.end && (
        <p class="bad" data-testid="websocket-end">
          ended without a close handshake after {ms(v.end.atMs)}: {v.end.code} {v.end.message}
        </p>
      )}
    </div>
  )
}
