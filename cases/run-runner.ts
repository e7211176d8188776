/**
 * Running a runner case: the runner module is imported and its export called with the interceptor in strict
 * replay from an in-memory store. In this realm (`runRunner`), or in a child Node process
 * (`runRunnerInChild`) when this realm's fetch cannot be captured: jest's test environments and vitest's vm
 * pools are vm contexts whose fetch comes from the outer realm and reads that realm's global dispatcher, so
 * an interceptor installed here would let every request go to the network.
 */
import { fork } from 'node:child_process'
import { stat } from 'node:fs/promises'
import { resolve } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import type { SessionSummary } from '../engine/index.ts'
import { globalFetchIsCapturable, install } from '../interceptor/index.ts'
import { createMemoryStore } from '../store/index.ts'
import { ErrorCodes, parseJson, stringifyJson, ToolReplayError } from '../trace/index.ts'
import type { IntactCase } from './manifest.ts'

/** What running a case produced: the app's result, the replay summary, and the app's failure if any. */
export interface RunOutcome {
  actual: unknown
  summary: SessionSummary
  error?: unknown
}

/** Longest a runner may take before verification gives up on it, in ms. */
export const RUNNER_TIMEOUT_MS = 120_000

/** True when a runner can run in this realm: the global fetch is the one an installed dispatcher captures. */
export function canRunInProcess(): boolean {
  return globalFetchIsCapturable()
}

/** Imports the runner module and calls its export under strict replay, in this process. */
export async function runRunner(c: IntactCase, run: { module: string; export: string }): Promise<RunOutcome> {
  const modulePath = await runnerModulePath(c, run)
  const store = createMemoryStore()
  await store.putTrace(c.trace)
  // Self-contained: the settings file of whatever directory verify runs in must not change the verdict.
  const tr = await install({ mode: 'replay', trace: c.manifest.name, store, config: false })
  let actual: unknown
  let error: unknown
  try {
    const mod = (await import(pathToFileURL(modulePath).href)) as Record<string, unknown>
    const fn = mod[run.export]
    if (typeof fn !== 'function') throw new TypeError(`${run.module} has no exported function "${run.export}"`)
    actual = toJson(await withTimeout((fn as () => unknown)(), RUNNER_TIMEOUT_MS, `${run.module}#${run.export}`))
  } catch (err) {
    error = err
  }
  const summary = await tr.close()
  await store.close()
  return error === undefined ? { actual, summary } : { actual, summary, error }
}

/** The message a child sends back: JSON-safe, the result as exact JSON text. */
export interface ChildMessage {
  actual?: string
  summary?: SessionSummary
  error?: { name: string; message: string; stack?: string; code?: string }
  /** A ToolReplayError that stopped the run before the app ran (integrity). */
  fatal?: { code: string; message: string }
}

/** Runs the case in a child Node process (see runner-process.ts) and rebuilds its outcome here. */
export async function runRunnerInChild(c: IntactCase, run: { module: string; export: string }): Promise<RunOutcome> {
  await runnerModulePath(c, run)
  const self = import.meta.url
  // From the sources, the file beside this one; from the package, dist/cases/runner-process.js, which the build
  // makes an entry of its own (this code may sit in any module one folder below dist/).
  const entry = fileURLToPath(new URL(self.endsWith('.ts') ? './runner-process.ts' : '../cases/runner-process.js', self))
  // Only resolution conditions carry over (a checkout runs with --conditions=tool-replay-source); test-runner
  // flags and preloads must not.
  const execArgv = process.execArgv.filter((a) => a.startsWith('--conditions=') || a.startsWith('-C='))
  const message = await new Promise<ChildMessage>((resolvePromise, reject) => {
    const child = fork(entry, [c.dir], { execArgv, stdio: ['ignore', 'inherit', 'inherit', 'ipc'], serialization: 'json' })
    let received: ChildMessage | undefined
    const timer = setTimeout(() => child.kill('SIGKILL'), RUNNER_TIMEOUT_MS + 10_000)
    child.on('message', (m: ChildMessage) => {
      received = m
    })
    child.once('error', (err) => {
      clearTimeout(timer)
      reject(err)
    })
    child.once('exit', (code, signal) => {
      clearTimeout(timer)
      if (received) resolvePromise(received)
      else
        reject(
          new ToolReplayError(
            ErrorCodes.CASE_APP_ERROR,
            `Case "${c.manifest.name}": the child Node process that runs the runner (needed because this test environment's fetch cannot be captured in-process) ended (${signal ?? `exit ${code}`}) without a result. Run \`tr-proxy verify ${c.dir}\` to see the app's own output.`,
          ),
        )
    })
  })
  if (message.fatal) throw new ToolReplayError(message.fatal.code as ToolReplayError['code'], message.fatal.message)
  const summary = message.summary as SessionSummary
  const actual = message.actual === undefined ? undefined : parseJson(message.actual)
  if (!message.error) return { actual, summary }
  const error = Object.assign(new Error(message.error.message), { name: message.error.name, stack: message.error.stack })
  if (message.error.code !== undefined) Object.assign(error, { code: message.error.code })
  return { actual, summary, error }
}

/** Serializes an outcome for the parent. */
export function outcomeMessage(outcome: RunOutcome): ChildMessage {
  const m: ChildMessage = { summary: outcome.summary }
  if (outcome.actual !== undefined) m.actual = stringifyJson(outcome.actual)
  if (outcome.error !== undefined) {
    const e = outcome.error as { name?: unknown; message?: unknown; stack?: unknown; code?: unknown }
    m.error = { name: typeof e?.name === 'string' ? e.name : 'Error', message: typeof e?.message === 'string' ? e.message : String(outcome.error) }
    if (typeof e?.stack === 'string') m.error.stack = e.stack
    if (typeof e?.code === 'string') m.error.code = e.code
  }
  return m
}

async function runnerModulePath(c: IntactCase, run: { module: string }): Promise<string> {
  const modulePath = resolve(c.dir, run.module)
  const st = await stat(modulePath).catch(() => undefined)
  if (!st?.isFile()) {
    throw new ToolReplayError(
      ErrorCodes.CASE_INTEGRITY,
      `Case ${c.dir} is not intact: the runner module ${run.module} (${modulePath}) does not exist. Restore it from version control or re-emit it with \`tr-proxy emit-test\`.`,
      { details: { case: c.dir } },
    )
  }
  return modulePath
}

async function withTimeout<T>(value: T | Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} did not settle within ${ms / 1000} s`)), ms)
    timer.unref()
  })
  try {
    return await Promise.race([value, timeout])
  } finally {
    clearTimeout(timer)
  }
}

/** The return value as JSON sees it (undefined becomes null), so it compares like the stored expectation. */
function toJson(v: unknown): unknown {
  const s = JSON.stringify(v)
  return s === undefined ? null : parseJson(s)
}
