/**
 * Runs the real `git` for the assets repository. Every call is bounded by a timeout, never prompts (a remote
 * that needs credentials fails at once instead of hanging CI), speaks English (messages are matched), and
 * fails with TR_ASSETS_GIT_FAILED naming the command and git's own message.
 */
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { createWriteStream } from 'node:fs'
import { ErrorCodes, ToolReplayError } from '../trace/index.ts'

/** How long one git command may take (a fetch of a big tag included), in ms. */
export const GIT_TIMEOUT_MS = 300_000

const INHERITED_REPOSITORY_VARIABLES = [
  'GIT_DIR',
  'GIT_WORK_TREE',
  'GIT_INDEX_FILE',
  'GIT_OBJECT_DIRECTORY',
  'GIT_ALTERNATE_OBJECT_DIRECTORIES',
  'GIT_COMMON_DIR',
  'GIT_NAMESPACE',
  'GIT_PREFIX',
]

/** Options of one git call. */
export interface GitOptions {
  /** The repository (`--git-dir`). */
  gitDir?: string
  /** Written to git's stdin. */
  input?: string | Uint8Array
  /** Extra environment (GIT_INDEX_FILE, GIT_WORK_TREE). */
  env?: Record<string, string>
  timeoutMs?: number
  /** Exit codes that are answers, not failures (`rev-parse --verify` exits 1 for "no such ref"). */
  okCodes?: number[]
  /** Write stdout to this file as it comes (an object of any size, in bounded memory), not into the result. */
  outFile?: string
}

/** What a git call returned. */
export interface GitResult {
  code: number
  /** stdout as text ('' with `outFile`). */
  stdout: string
  stderr: string
}

/** Runs `git ARGS`; a failure (or a code not in `okCodes`) is TR_ASSETS_GIT_FAILED. */
export function git(args: readonly string[], options: GitOptions = {}): Promise<GitResult> {
  const argv = options.gitDir ? [`--git-dir=${options.gitDir}`, ...args] : [...args]
  const env: NodeJS.ProcessEnv = { ...process.env }
  // A caller inside a git hook (husky) has these set for its own repository; they must not redirect ours.
  for (const k of INHERITED_REPOSITORY_VARIABLES) delete env[k]
  Object.assign(env, {
    LC_ALL: 'C',
    LANGUAGE: 'C',
    GIT_TERMINAL_PROMPT: '0',
    GIT_SSH_COMMAND: process.env.GIT_SSH_COMMAND ?? 'ssh -o BatchMode=yes',
    ...options.env,
  })
  return new Promise((resolve, reject) => {
    const child = spawn('git', argv, { env, stdio: ['pipe', 'pipe', 'pipe'] })
    const file = options.outFile === undefined ? undefined : createWriteStream(options.outFile)
    // The file is whole once its stream finished (and failed if it could not be written).
    const written = file
      ? once(file, 'finish').then(
          () => undefined,
          (e: Error) => e,
        )
      : Promise.resolve(undefined)
    if (file) child.stdout.pipe(file)
    const out: Buffer[] = []
    const err: Buffer[] = []
    let timedOut = false
    const timer = setTimeout(() => {
      timedOut = true
      child.kill('SIGKILL')
    }, options.timeoutMs ?? GIT_TIMEOUT_MS)
    if (!file) child.stdout.on('data', (c: Buffer) => out.push(c))
    child.stderr.on('data', (c: Buffer) => err.push(c))
    child.on('error', (e: NodeJS.ErrnoException) => {
      clearTimeout(timer)
      const why = e.code === 'ENOENT' ? 'git is not installed (install it: apt-get install git, or your platform’s package)' : e.message
      reject(new ToolReplayError(ErrorCodes.ASSETS_GIT_FAILED, `Cannot run git ${args[0]}: ${why}.`, { cause: e }))
    })
    child.on('close', async (code) => {
      clearTimeout(timer)
      const failed = await written
      if (failed) {
        reject(new ToolReplayError(ErrorCodes.STORE_IO, `Cannot write ${options.outFile} from git ${args[0]}: ${failed.message}.`, { cause: failed }))
        return
      }
      const result: GitResult = { code: code ?? -1, stdout: Buffer.concat(out).toString('utf8'), stderr: Buffer.concat(err).toString('utf8') }
      if (timedOut) reject(gitFailed(args, result, `timed out after ${options.timeoutMs ?? GIT_TIMEOUT_MS} ms`))
      else if (result.code === 0 || options.okCodes?.includes(result.code)) resolve(result)
      else reject(gitFailed(args, result))
    })
    child.stdin.on('error', () => {})
    child.stdin.end(options.input ?? '')
  })
}

/** TR_ASSETS_GIT_FAILED for a git command that failed, with the last lines git printed. */
export function gitFailed(args: readonly string[], result: GitResult, why?: string): ToolReplayError {
  const said = result.stderr.trim().split('\n').slice(-4).join(' | ')
  return new ToolReplayError(
    ErrorCodes.ASSETS_GIT_FAILED,
    `git ${args.slice(0, 3).join(' ')} failed: ${why ?? (said || `exit ${result.code}`)}. Check the remote URL, that it is reachable, and your git credentials (credential helper or SSH key; Tool Replay never prompts).`,
    { details: { command: ['git', ...args], code: result.code, stderr: result.stderr.slice(-2000) } },
  )
}
