/**
 * Running a command case: the command runs with the proxy in strict replay in front of it (HTTP(S)_PROXY,
 * NODE_USE_ENV_PROXY, NODE_EXTRA_CA_CERTS), its stdout captured. The proxy's CA lives in a temp directory
 * removed afterwards: verification writes nothing into the case.
 */
import { spawn } from 'node:child_process'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { Writable } from 'node:stream'
import { openSession, type Session, type SessionSummary } from '../engine/index.ts'
import {
  type CertificateAuthority,
  loadCertificateAuthority,
  type ProxyServer,
  startProxy,
  startSealedCommand,
  wrappedCommandEnvironment,
  writeCaBundle,
} from '../proxy/index.ts'
import { createMemoryStore } from '../store/index.ts'
import { ErrorCodes, ToolReplayError } from '../trace/index.ts'
import type { IntactCase } from './manifest.ts'

/** Longest a command case may run before it is killed, in ms. */
export const COMMAND_CASE_TIMEOUT_MS = 120_000

/** Runs a command case's command under a strict-replay proxy; returns its exit code, stdout and the replay summary. */
export async function runCommandCase(
  c: IntactCase,
  run: { command: string[]; cwd: string },
  options: { sealed?: boolean } = {},
): Promise<{ actual: { exitCode: number; stdout: string }; summary: SessionSummary; error?: unknown }> {
  const temp = await mkdtemp(join(tmpdir(), 'tr-case-'))
  const store = createMemoryStore()
  try {
    await store.putTrace(c.trace)
    const ca = await loadCertificateAuthority(temp)
    const session = await openSession({ mode: 'replay', trace: c.manifest.name, store })
    const proxy = await startProxy({ session, ca })
    let result: { exitCode: number; stdout: string; stderr: string } | undefined
    let error: unknown
    try {
      const cwd = resolve(c.dir, run.cwd)
      result = options.sealed
        ? await runSealed(run.command, cwd, proxy, ca, temp)
        : await spawnCaptured(run.command, cwd, wrappedCommandEnvironment({ proxyUrl: proxy.url, caPath: ca.certPath, bundlePath: ca.certPath }))
    } catch (err) {
      error = err
    }
    const summary = await proxy.close()
    if (error !== undefined || !result) return { actual: { exitCode: -1, stdout: '' }, summary, error }
    const actual = { exitCode: result.exitCode, stdout: result.stdout }
    // A non-zero exit where success was expected is the app failing, not a different decision.
    const expectedExit = 'exitCode' in c.manifest.expect ? c.manifest.expect.exitCode : undefined
    if (result.exitCode !== 0 && (expectedExit === undefined || expectedExit === 0)) {
      const tail = result.stderr.trim().split('\n').slice(-5).join('\n')
      return { actual, summary, error: new Error(`command "${run.command.join(' ')}" exited ${result.exitCode}${tail ? `:\n${tail}` : ''}`) }
    }
    return { actual, summary }
  } finally {
    await store.close()
    await rm(temp, { recursive: true, force: true })
  }
}

/** "node" means the Node running Tool Replay, so a case runs on the same runtime wherever PATH points. */
function thisNode(argv: string[]): [string, ...string[]] {
  const [cmd, ...args] = argv as [string, ...string[]]
  return [cmd === 'node' ? process.execPath : cmd, ...args]
}

/** The command sealed (`--sealed`): its only way out is the strict-replay proxy; its output collected. */
async function runSealed(
  argv: string[],
  cwd: string,
  proxy: ProxyServer<Session>,
  ca: CertificateAuthority,
  temp: string,
): Promise<{ exitCode: number; stdout: string; stderr: string }> {
  const bundlePath = await writeCaBundle(temp, ca)
  const out: Buffer[] = []
  const err: Buffer[] = []
  const collect = (into: Buffer[]) =>
    new Writable({
      write: (chunk: Buffer, _enc, done) => {
        into.push(chunk)
        done()
      },
    })
  const sealed = await startSealedCommand(thisNode(argv), {
    caBundle: bundlePath,
    commandOptions: { cwd, output: { stdout: collect(out), stderr: collect(err) } },
  })
  const timer = setTimeout(() => sealed.stop(), COMMAND_CASE_TIMEOUT_MS)
  try {
    const exit = await sealed.run(proxy, (proxyUrl) => wrappedCommandEnvironment({ proxyUrl, caPath: ca.certPath, bundlePath, sealed: true }), {
      upstream: {},
      log: () => {},
    })
    return { exitCode: exit.code, stdout: Buffer.concat(out).toString('utf8'), stderr: Buffer.concat(err).toString('utf8') }
  } finally {
    clearTimeout(timer)
  }
}

function spawnCaptured(argv: string[], cwd: string, env: Record<string, string>): Promise<{ exitCode: number; stdout: string; stderr: string }> {
  const [command, ...args] = thisNode(argv)
  return new Promise((resolvePromise, reject) => {
    const child = spawn(command, args, { cwd, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] })
    const out: Buffer[] = []
    const err: Buffer[] = []
    child.stdout.on('data', (b: Buffer) => out.push(b))
    child.stderr.on('data', (b: Buffer) => err.push(b))
    const timer = setTimeout(() => child.kill('SIGKILL'), COMMAND_CASE_TIMEOUT_MS)
    child.once('error', (e: NodeJS.ErrnoException) => {
      clearTimeout(timer)
      reject(
        new ToolReplayError(
          ErrorCodes.CASE_APP_ERROR,
          `Failed to start "${argv.join(' ')}" in ${cwd}: ${e.code ?? e.message}. Check the command is installed.`,
          { cause: e },
        ),
      )
    })
    child.once('close', (code, signal) => {
      clearTimeout(timer)
      resolvePromise({
        exitCode: code ?? (signal === 'SIGKILL' ? 137 : 128),
        stdout: Buffer.concat(out).toString('utf8'),
        stderr: Buffer.concat(err).toString('utf8'),
      })
    })
  })
}
