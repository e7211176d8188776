/**
 * A real git server for the assets e2e tests: Debian's `git daemon` serving bare repositories from a temp
 * folder on 127.0.0.1, pushes allowed, partial clone allowed (as GitHub and GitLab allow it). Started by the
 * test and stopped after it.
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process'
import { once } from 'node:events'
import { createServer } from 'node:net'
import { join } from 'node:path'

/** A running `git daemon`. */
export interface GitDaemon {
  port: number
  /** `git://127.0.0.1:PORT/NAME.git` for a bare repository made with `bareRepo`. */
  url(name: string): string
  /** Creates `NAME.git`, bare, with partial clone allowed; returns its path. */
  bareRepo(name: string): string
  close(): Promise<void>
}

async function freePort(): Promise<number> {
  const server = createServer()
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  const port = (server.address() as { port: number }).port
  await new Promise<void>((resolve) => server.close(() => resolve()))
  return port
}

/** Starts `git daemon` on a free loopback port (tried again on another port if that one was taken meanwhile). */
export async function startGitDaemon(root: string): Promise<GitDaemon> {
  let lastError = ''
  for (let attempt = 0; attempt < 5; attempt++) {
    const port = await freePort()
    const child = spawn(
      'git',
      [
        'daemon',
        '--verbose',
        '--reuseaddr',
        '--listen=127.0.0.1',
        `--port=${port}`,
        `--base-path=${root}`,
        '--export-all',
        '--enable=receive-pack',
        '--informative-errors',
        root,
      ],
      { stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, LC_ALL: 'C' } },
    )
    const ready = await waitReady(child)
    if (ready === true) return daemon(child, root, port)
    lastError = ready
    child.kill('SIGKILL')
  }
  throw new Error(`git daemon did not start: ${lastError}`)
}

/** Resolves true on "Ready to rumble", else with what git said (bounded: 10 s). */
function waitReady(child: ChildProcess): Promise<true | string> {
  return new Promise((resolve) => {
    let said = ''
    const timer = setTimeout(() => resolve(`no "Ready to rumble" within 10 s: ${said}`), 10_000)
    child.stderr?.on('data', (c: Buffer) => {
      said += c.toString()
      if (said.includes('Ready to rumble')) {
        clearTimeout(timer)
        resolve(true)
      }
    })
    child.once('exit', (code) => {
      clearTimeout(timer)
      resolve(`exited ${code}: ${said}`)
    })
  })
}

function daemon(child: ChildProcess, root: string, port: number): GitDaemon {
  // Keep reading its log so the pipe never fills and blocks it.
  child.stderr?.resume()
  return {
    port,
    url: (name) => `git://127.0.0.1:${port}/${name}.git`,
    bareRepo: (name) => {
      const dir = join(root, `${name}.git`)
      execFileSync('git', ['init', '--quiet', '--bare', dir])
      for (const [k, v] of [
        ['uploadpack.allowFilter', 'true'],
        ['uploadpack.allowAnySHA1InWant', 'true'],
      ])
        execFileSync('git', [`--git-dir=${dir}`, 'config', k as string, v as string])
      return dir
    },
    close: async () => {
      if (child.exitCode !== null) return
      child.kill('SIGTERM')
      await once(child, 'exit')
    },
  }
}
