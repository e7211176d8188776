/**
 * Running a command case: the command runs with the proxy in strict replay in front of it (HTTP(S)_PROXY,
 * NODE_USE_ENV_PROXY, NODE_EXTRA_CA_CERTS), its stdout captured. The proxy's CA lives in a temp directory
 * removed afterwards: verification writes nothing into the case.
 */
import { spawn } from 'node:child_process'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { openSession, PROXY_RUN_ENV, type SessionSummary } from '../engine/index.ts'
import { loadCertificateAuthority, proxyEnvironment, startProxy } from '../proxy/index.ts'
import { createMemoryStore } from '../store/index.ts'
import { ErrorCodes, ToolReplayError } from '../trace/index.ts'
import type { IntactCase } from './manifest.ts'

/** Longest a command case may run before it is killed, in ms. */
export const COMMAND_CASE_TIMEOUT_MS = 120_000

/** Runs a command case's command under a strict-replay proxy; returns its exit code, stdout and the replay summary. */
export async function runCommandCase(
  c: IntactCase,
  run: { command: string[]; cwd: string },
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
      result = await spawnCaptured(run.command, resolve(c.dir, run.cwd), {
        ...proxyEnvironment({ proxyUrl: proxy.url, caPath: ca.certPath, bundlePath: ca.certPath }),
        [PROXY_RUN_ENV]: '1',
      })
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

function spawnCaptured(argv: string[], cwd: string, env: Record<string, string>): Promise<{ exitCode: number; stdout: string; stderr: string }> {
  // "node" means the Node running Tool Replay, so a case runs on the same runtime wherever PATH points.
  const [cmd, ...args] = argv as [string, ...string[]]
  const command = cmd === 'node' ? process.execPath : cmd
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
