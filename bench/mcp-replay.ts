/**
 * MCP over stdio, the conversation's own cost: N tools/call messages recorded against an in-process echo server
 * (no child process, so the figure is Tool Replay's and not the server's), then replayed strictly with the ids
 * shifted, then one unrecorded request (the time until its TR_REPLAY_MISS error reaches the client).
 *   node --conditions=tool-replay-source bench/mcp-replay.ts [N]
 */
import { performance } from 'node:perf_hooks'
import { openSession } from '../engine/index.ts'
import { McpConversation, type ServerEnd } from '../mcp/index.ts'
import { createMemoryStore } from '../store/index.ts'

const N = Number(process.argv[2] ?? 2000)
const store = createMemoryStore()

async function run(mode: 'record' | 'replay', base: number, extra = false): Promise<{ ms: number; missMs?: number }> {
  const session = await openSession({ mode, trace: 'bench', store })
  let conversation: McpConversation | undefined
  const answers = new Map<unknown, () => void>()
  const server: ServerEnd = {
    write: (line) => {
      const m = JSON.parse(line) as { id?: unknown; params?: { arguments?: unknown } }
      if (m.id !== undefined)
        queueMicrotask(() =>
          conversation?.serverLine(
            JSON.stringify({ jsonrpc: '2.0', id: m.id, result: { content: [{ type: 'text', text: JSON.stringify(m.params?.arguments) }] } }),
          ),
        )
    },
    closeInput: () => queueMicrotask(() => conversation?.serverExit(0, null)),
    kill: () => {},
  }
  conversation = new McpConversation({
    session,
    server: 'echo',
    command: ['echo-server'],
    log: () => {},
    client: { send: (line) => answers.get((JSON.parse(line) as { id?: unknown }).id)?.(), stderr: () => {}, exit: () => {}, separate: async () => {} },
    start: async () => server,
  })
  await conversation.launch()
  const call = (id: number, n: number) =>
    new Promise<void>((resolve) => {
      answers.set(id, resolve)
      conversation?.fromClient(JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'echo', arguments: { n } } }))
    })
  const t0 = performance.now()
  for (let i = 0; i < N; i++) await call(base + i, i)
  const ms = performance.now() - t0
  let missMs: number | undefined
  if (extra) {
    const t1 = performance.now()
    await call(base + N, -1)
    missMs = performance.now() - t1
  }
  conversation.clientClosed()
  await conversation.done
  await session.close()
  return { ms, ...(missMs !== undefined ? { missMs } : {}) }
}

const rec = await run('record', 1)
const rep = await run('replay', 100_000, true)
const per = (ms: number) => `${((ms * 1000) / N).toFixed(1)} µs/message, ${Math.round((N / ms) * 1000)} messages/s`
console.log(`MCP tools/call x ${N} (in-process echo server, memory store)`)
console.log(`record: ${rec.ms.toFixed(0)} ms (${per(rec.ms)})`)
console.log(`strict replay (ids shifted): ${rep.ms.toFixed(0)} ms (${per(rep.ms)})`)
console.log(`a miss: TR_REPLAY_MISS error at the client after ${rep.missMs?.toFixed(2)} ms`)
await store.close()
