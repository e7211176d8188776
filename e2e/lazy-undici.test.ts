/**
 * undici is loaded when it is needed, not on `import('tool-replay/interceptor')`; each case runs in a fresh
 * process (what is loaded, and in which order, is the point). Whoever loads undici and whenever, a dispatcher
 * is `instanceof` the app's `undici.Dispatcher` with its API, and the app's own `import('undici')` stays whole
 * (`Agent is not a constructor` was the symptom of a second, empty module record).
 */
import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { dirname, join } from 'node:path'
import { test } from 'node:test'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..')

/** Runs `body` as an ES module in a fresh Node inside this package (so `tool-replay/*` resolves) and returns what it prints as JSON. */
async function inFreshProcess(body: string): Promise<Record<string, unknown>> {
  const prelude = `
    import { createRequire } from 'node:module'
    import http from 'node:http'
    const loadedUndiciFiles = () => Object.keys(createRequire(process.cwd() + '/').cache).filter((f) => /[\\\\/]undici[\\\\/]/.test(f))
    const undiciIndexLoaded = () => loadedUndiciFiles().some((f) => /[\\\\/]undici[\\\\/]index\\.js$/.test(f))
    async function startServer() {
      const server = http.createServer((req, res) => res.end('hello ' + req.url))
      await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve))
      return { url: 'http://127.0.0.1:' + server.address().port, close: () => new Promise((resolve) => server.close(resolve)) }
    }
    const out = {}
  `
  const { stdout } = await promisify(execFile)(
    process.execPath,
    ['--conditions=tool-replay-source', '--input-type=module', '-e', `${prelude}\n${body}\nconsole.log(JSON.stringify(out))`],
    { cwd: ROOT },
  )
  return JSON.parse(stdout.trim().split('\n').at(-1) ?? '{}') as Record<string, unknown>
}

test("importing the interceptor loads undici's Dispatcher class only, not its HTTP client", async () => {
  const out = await inFreshProcess(`
    await import('tool-replay/interceptor')
    out.files = loadedUndiciFiles().map((f) => f.replace(/.*[\\\\/]undici[\\\\/]/, '')).sort()
  `)
  assert.deepEqual(out.files, ['lib/core/errors.js', 'lib/core/symbols.js', 'lib/dispatcher/dispatcher.js'])
})

/**
 * A record-mode dispatcher from the sync factory in a process where nothing loaded undici yet (`server`,
 * `session`, `dispatcher`). The probe is taken before the call: the factory starts loading undici, and on Node 24
 * and later its file is in the module cache as soon as that begins.
 */
const FACTORY_BEFORE_UNDICI = `
    const { createRecordReplayDispatcher } = await import('tool-replay/interceptor')
    const { openSession } = await import('tool-replay/engine')
    const { createMemoryStore } = await import('tool-replay/store')
    const server = await startServer()
    const session = await openSession({ mode: 'record', trace: 't', store: createMemoryStore() })
    out.indexLoadedBefore = undiciIndexLoaded()
    const dispatcher = createRecordReplayDispatcher({ session })
`

test("the sync factory before any undici: instanceof the app's later undici.Dispatcher, its API, and a live request through its own Agent", async () => {
  const out = await inFreshProcess(`
    ${FACTORY_BEFORE_UNDICI}
    // Node's bundled fetch, at once: the live request waits for the Agent that undici's loading brings.
    out.body = await (await fetch(server.url + '/first', { dispatcher })).text()
    const undici = await import('undici')
    out.isInstance = dispatcher instanceof undici.Dispatcher
    out.api = ['request', 'stream', 'pipeline', 'connect', 'upgrade', 'compose'].filter((m) => typeof dispatcher[m] === 'function')
    out.agentWorks = typeof new undici.Agent().dispatch === 'function'
    // One copy of the class file in the module cache: the base class is the one undici's index.js uses.
    out.dispatcherClassFiles = loadedUndiciFiles().filter((f) => /lib[\\/]dispatcher[\\/]dispatcher.js$/.test(f)).length
    const viaApi = await dispatcher.request({ origin: server.url, path: '/api', method: 'GET' })
    out.viaApi = await viaApi.body.text()
    await session.close()
    await dispatcher.close()
    await server.close()
  `)
  assert.deepEqual(out, {
    indexLoadedBefore: false,
    body: 'hello /first',
    isInstance: true,
    api: ['request', 'stream', 'pipeline', 'connect', 'upgrade', 'compose'],
    agentWorks: true,
    dispatcherClassFiles: 1,
    viaApi: 'hello /api',
  })
})

test("the sync factory's dispatcher answers undici's API at once, before anything loaded undici (promise and callback)", async () => {
  const out = await inFreshProcess(`
    ${FACTORY_BEFORE_UNDICI}
    // At once, before undici's loading (which the factory starts) is over: pipeline cannot wait, so it refuses.
    try {
      dispatcher.pipeline({ origin: server.url, path: '/p', method: 'GET' }, () => {})
      out.pipeline = 'returned'
    } catch (err) {
      out.pipeline = err.code
    }
    const res = await dispatcher.request({ origin: server.url, path: '/promise', method: 'GET' })
    out.promise = await res.body.text()
    out.callback = await new Promise((resolve, reject) =>
      dispatcher.request({ origin: server.url, path: '/callback', method: 'GET' }, (err, r) => (err ? reject(err) : r.body.text().then(resolve, reject))),
    )
    await dispatcher.close()
    await server.close()
  `)
  assert.deepEqual(out, { indexLoadedBefore: false, pipeline: 'TR_INVALID_OPTION', promise: 'hello /promise', callback: 'hello /callback' })
})

test("undici imported first: the factory's dispatcher is an undici Dispatcher at once", async () => {
  const out = await inFreshProcess(`
    const undici = await import('undici')
    const { createRecordReplayDispatcher } = await import('tool-replay/interceptor')
    const { openSession } = await import('tool-replay/engine')
    const { createMemoryStore } = await import('tool-replay/store')
    const dispatcher = createRecordReplayDispatcher({ session: await openSession({ mode: 'record', trace: 't', store: createMemoryStore() }) })
    out.isInstance = dispatcher instanceof undici.Dispatcher
    out.hasRequest = typeof dispatcher.request === 'function'
    await dispatcher.close()
  `)
  assert.deepEqual(out, { isInstance: true, hasRequest: true })
})

test("install() hands out a whole undici Dispatcher, and after recorded traffic the app's own import of undici is whole", async () => {
  const out = await inFreshProcess(`
    const { install } = await import('tool-replay/interceptor')
    const { createMemoryStore } = await import('tool-replay/store')
    const server = await startServer()
    const tr = await install({ mode: 'record', trace: 't', store: createMemoryStore() })
    out.requestBeforeAppImport = typeof tr.dispatcher.request === 'function'
    out.body = await (await fetch(server.url + '/recorded')).text()
    await tr.close()
    const undici = await import('undici')
    out.isInstance = tr.dispatcher instanceof undici.Dispatcher
    const agent = new undici.Agent()
    const res = await undici.request(server.url + '/after', { dispatcher: agent })
    out.after = await res.body.text()
    await agent.close()
    await server.close()
  `)
  assert.deepEqual(out, { requestBeforeAppImport: true, body: 'hello /recorded', isInstance: true, after: 'hello /after' })
})
