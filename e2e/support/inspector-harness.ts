/** Starts `tr-proxy inspect` as a user does (a child process) and reads the URL it prints. */
import { type ChildProcess, spawn } from 'node:child_process'
import { fileURLToPath } from 'node:url'

const BIN = fileURLToPath(new URL('../../bin/tr-proxy.js', import.meta.url))

/** A running `tr-proxy inspect`. */
export interface RunningInspector {
  url: string
  origin: string
  token: string
  child: ChildProcess
  stop: () => Promise<void>
}

/** Runs `tr-proxy inspect --store STORE --port 0 ...args` in `cwd`; resolves once it printed its URL (30 s at most). */
export async function startInspectCli(store: string, cwd: string, args: string[] = [], env: NodeJS.ProcessEnv = {}): Promise<RunningInspector> {
  // As a user starts it: not as a child of this test runner (NODE_TEST_CONTEXT would make the `node --test`
  // commands it reruns skip their files).
  const { NODE_TEST_CONTEXT: _, ...parent } = process.env
  const child = spawn(process.execPath, [BIN, 'inspect', '--store', store, '--port', '0', ...args], {
    cwd,
    env: { ...parent, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let out = ''
  let err = ''
  child.stderr.on('data', (c: Buffer) => (err += c))
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`tr-proxy inspect printed no URL in 30 s: ${out}${err}`)), 30_000)
    child.stdout.on('data', (c: Buffer) => {
      out += c
      const m = /(http:\/\/127\.0\.0\.1:\d+\/\?token=[\w-]+)/.exec(out)
      if (m) {
        clearTimeout(timer)
        resolve(m[1] as string)
      }
    })
    child.once('exit', (code) => {
      clearTimeout(timer)
      reject(new Error(`tr-proxy inspect exited ${code}: ${out}${err}`))
    })
  })
  const u = new URL(url)
  return {
    url,
    origin: u.origin,
    token: u.searchParams.get('token') as string,
    child,
    // Bounded: SIGTERM, then SIGKILL if it has not exited within 10 s.
    stop: async () => {
      if (child.exitCode !== null || child.signalCode !== null) return
      const done = new Promise((r) => child.once('exit', r))
      child.kill('SIGTERM')
      const timer = setTimeout(() => child.kill('SIGKILL'), 10_000)
      await done
      clearTimeout(timer)
    },
  }
}
