import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { test } from 'node:test'
import { fileURLToPath } from 'node:url'

const root = (path: string) => JSON.stringify(fileURLToPath(new URL(`../${path}`, import.meta.url)))

/** Runs `script` in a fresh Node process (nothing in it has turned promise hooks on yet) and returns its stdout. */
async function inFreshProcess(script: string): Promise<string> {
  const child = spawn(process.execPath, ['--conditions=tool-replay-source', '--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'inherit'] })
  let out = ''
  child.stdout.on('data', (d: Buffer) => (out += d))
  const [code] = await once(child, 'exit')
  assert.equal(code, 0, out)
  return out
}

// On Node 22 a promise continuation runs with executionAsyncId() 0 unless promise hooks are on, which the first
// AsyncLocalStorage.run() does for the rest of the process (Node 24 and 26 need no hooks: 0 either way there).
test("recording through the dispatcher leaves msw's connection context alone until something patches sockets, so it turns no promise hooks on", async () => {
  const out = await inFreshProcess(`
    import http from 'node:http'
    import { executionAsyncId } from 'node:async_hooks'
    import { SocketInterceptor } from '@mswjs/interceptors/net'
    import { Agent, fetch } from 'undici'
    import { createMemoryStore, openSession } from ${root('index.ts')}
    import { createRecordReplayDispatcher } from ${root('interceptor/index.ts')}
    const context = globalThis.__MSW_INTERNAL_CONNECTION_CONTEXT
    let runs = 0
    const run = context.run.bind(context)
    context.run = (fn) => (runs++, run(fn))
    const probe = async () => { await null; return executionAsyncId() }
    const server = http.createServer((req, res) => res.end('ok')).listen(0, '127.0.0.1')
    await new Promise((r) => server.once('listening', r))
    const url = 'http://127.0.0.1:' + server.address().port + '/'
    const upstream = new Agent()
    const session = await openSession({ mode: 'record', trace: 't', store: createMemoryStore() })
    const dispatcher = createRecordReplayDispatcher({ session, upstream })
    const text = async () => (await fetch(url, { dispatcher })).text()
    const before = { body: await text(), runs, hook: await probe() }
    const sockets = new SocketInterceptor()
    sockets.apply()
    const patched = { body: await text(), runs }
    sockets.dispose()
    const after = { body: await text(), runs }
    await session.close()
    await upstream.close()
    server.close()
    console.log(JSON.stringify({ before, patched, after }))
  `)
  const { before, patched, after } = JSON.parse(out)
  assert.deepEqual(before, { body: 'ok', runs: 0, hook: 0 }, 'nothing patched sockets: the context was not entered and no promise hook is on')
  assert.deepEqual(patched, { body: 'ok', runs: 1 }, "msw's socket interceptor applied: the live request's connect runs in the context, as before")
  assert.deepEqual(after, { body: 'ok', runs: 1 }, 'the interceptor disposed: the context is left alone again')
})

test("msw's socket interceptor applied before Tool Replay loads: every connect runs in msw's context, even after it is disposed", async () => {
  const out = await inFreshProcess(`
    import { SocketInterceptor } from '@mswjs/interceptors/net'
    const sockets = new SocketInterceptor()
    sockets.apply()
    const { runAsInternalConnection } = await import(${root('interceptor/internal-connection.ts')})
    const context = globalThis.__MSW_INTERNAL_CONNECTION_CONTEXT
    let runs = 0
    const run = context.run.bind(context)
    context.run = (fn) => (runs++, run(fn))
    const applied = runAsInternalConnection(() => 'connected')
    sockets.dispose()
    const disposed = runAsInternalConnection(() => 'connected')
    console.log(JSON.stringify({ applied, disposed, runs }))
  `)
  // Which connect is Node's own cannot be told once a patch came first: the bypass is always taken (as before).
  assert.deepEqual(JSON.parse(out), { applied: 'connected', disposed: 'connected', runs: 2 })
})
