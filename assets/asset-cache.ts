/**
 * The local cache of assets repositories: one bare git repository per remote, fetched shallow (the tag's
 * commit only) and partial (`--filter=blob:none`: trees, and then only the files asked for). Git's object
 * store is content-addressed, so a trace file or body blob two tags share is kept once, whichever tag
 * brought it. Every git command on a cache repository runs under its lock (cache-lock.ts), so concurrent CI
 * jobs restoring the same tag take turns: the first fetches, the next find the tag and objects in place.
 *
 *   <cache>/repos/<sha256(remote) prefix>.git    the repository
 *   <cache>/repos/<...>.lock                      its lock
 *   <cache>/tmp/                                  restored files and staged pushes, removed after use
 */
import { createHash, randomBytes } from 'node:crypto'
import { mkdir, mkdtemp, rename, rm, stat } from 'node:fs/promises'
import { homedir } from 'node:os'
import { dirname, join } from 'node:path'
import { ErrorCodes, ToolReplayError } from '../trace/index.ts'
import { withFileLock } from './cache-lock.ts'
import { git } from './git.ts'

/** The cache folder: TOOL_REPLAY_ASSETS_CACHE, else $XDG_CACHE_HOME/tool-replay/assets, else ~/.cache/tool-replay/assets. */
export function defaultAssetsCacheDir(env: Record<string, string | undefined> = process.env): string {
  if (env.TOOL_REPLAY_ASSETS_CACHE) return env.TOOL_REPLAY_ASSETS_CACHE
  return join(env.XDG_CACHE_HOME || join(homedir(), '.cache'), 'tool-replay', 'assets')
}

/** The cache repository of `remote` (its path and lock), without touching anything. */
export function cacheRepoPaths(cacheDir: string, remote: string): { gitDir: string; lock: string } {
  const key = createHash('sha256').update(remote).digest('hex').slice(0, 16)
  return { gitDir: join(cacheDir, 'repos', `${key}.git`), lock: join(cacheDir, 'repos', `${key}.lock`) }
}

/** A cache repository, used only inside `withAssetRepo` (under its lock). */
export class AssetRepo {
  readonly gitDir: string
  readonly remote: string
  readonly #tmp: string

  constructor(gitDir: string, remote: string, tmp: string) {
    this.gitDir = gitDir
    this.remote = remote
    this.#tmp = tmp
  }

  /** The commit a tag names in this cache, or undefined when the cache does not hold the tag. */
  async localTag(tag: string): Promise<string | undefined> {
    return localTagCommit(this.gitDir, tag)
  }

  /** The object the remote's tag points at, or undefined when the remote has no such tag. */
  async remoteTag(tag: string): Promise<string | undefined> {
    const r = await git(['ls-remote', '--tags', 'origin', `refs/tags/${tag}`], { gitDir: this.gitDir })
    return r.stdout
      .split('\n')
      .find((l) => l.endsWith(`\trefs/tags/${tag}`))
      ?.split('\t')[0]
  }

  /**
   * Makes the tag's commit and trees present (shallow, no file contents yet) and returns the commit. A tag
   * the cache already holds is not fetched again (tags are immutable here; the pointer's digests catch a tag
   * moved on the remote). A tag the remote does not have is TR_ASSETS_TAG_NOT_FOUND.
   */
  async fetchTag(tag: string): Promise<{ commit: string; fetched: boolean }> {
    const cached = await this.localTag(tag)
    if (cached) return { commit: cached, fetched: false }
    if (!(await this.remoteTag(tag))) {
      throw new ToolReplayError(
        ErrorCodes.ASSETS_TAG_NOT_FOUND,
        `The assets repository ${this.remote} has no tag "${tag}" (named by the assets pointer). Push it with \`tr-proxy assets push\`, or fix "tag" in the pointer (\`git ls-remote --tags ${this.remote}\` lists the tags).`,
        { details: { remote: this.remote, tag } },
      )
    }
    await git(['fetch', '--quiet', '--no-tags', '--depth=1', '--filter=blob:none', 'origin', `+refs/tags/${tag}:refs/tags/${tag}`], { gitDir: this.gitDir })
    const commit = await this.localTag(tag)
    if (!commit)
      throw new ToolReplayError(ErrorCodes.ASSETS_GIT_FAILED, `git fetch of tag "${tag}" from ${this.remote} reported success but the tag is not in the cache.`)
    return { commit, fetched: true }
  }

  /** Files under `dir` in a commit: path → blob id (trees only: nothing is downloaded). */
  async listFiles(commit: string, dir: string): Promise<Map<string, string>> {
    const r = await git(['ls-tree', '-r', '-z', '--full-tree', commit, '--', dir], { gitDir: this.gitDir, env: { GIT_LITERAL_PATHSPECS: '1' } })
    const out = new Map<string, string>()
    for (const entry of r.stdout.split('\0')) {
      const m = /^\d+ blob ([0-9a-f]+)\t(.*)$/s.exec(entry)
      if (m) out.set(m[2] as string, m[1] as string)
    }
    return out
  }

  /**
   * Writes `paths` (of the commit `files` lists) under `into`, byte for byte as stored: no checkout, so no
   * line-ending or attribute filter can touch them. Contents the cache lacks are fetched first, in one
   * request, the way git's own partial clone fetches a missing object.
   */
  async writeFiles(commit: string, paths: readonly string[], into: string, files: ReadonlyMap<string, string>): Promise<void> {
    if (paths.length === 0) return
    await this.#prefetch(commit, new Set(paths.map((p) => files.get(p) as string)))
    // One `cat-file` per file, its output streamed to the file: a trace file of any size is never held in memory.
    for (const path of paths) {
      const target = join(into, ...path.split('/'))
      await mkdir(dirname(target), { recursive: true })
      await git(['cat-file', 'blob', files.get(path) as string], { gitDir: this.gitDir, outFile: target })
    }
  }

  /** Fetches, in one request, those of `wanted` the cache lacks (objects of `commit`). */
  async #prefetch(commit: string, wanted: ReadonlySet<string>): Promise<void> {
    const listed = await git(['rev-list', '--objects', '--missing=print', commit], { gitDir: this.gitDir })
    const missing = listed.stdout
      .split('\n')
      .filter((l) => l.startsWith('?') && wanted.has(l.slice(1)))
      .map((l) => l.slice(1))
    if (missing.length === 0) return
    const fetch = ['fetch', '--quiet', '--no-tags', '--no-write-fetch-head', '--recurse-submodules=no', '--filter=blob:none', '--stdin', 'origin']
    await git(['-c', 'fetch.negotiationAlgorithm=noop', ...fetch], { gitDir: this.gitDir, input: `${missing.join('\n')}\n` })
  }

  /** A fresh folder under the cache's tmp/ (same file system as the cache), removed by the caller. */
  async tempDir(prefix: string): Promise<string> {
    return mkdtemp(join(this.#tmp, prefix))
  }
}

/** The commit of a tag in the cache repository at `gitDir`, without taking the lock (a read). */
export async function localTagCommit(gitDir: string, tag: string): Promise<string | undefined> {
  if (!(await stat(join(gitDir, 'HEAD')).catch(() => undefined))) return undefined
  const r = await git(['rev-parse', '--verify', '--quiet', `refs/tags/${tag}^{commit}`], { gitDir, okCodes: [1] })
  return r.code === 0 ? r.stdout.trim() : undefined
}

/** Runs `fn` on the cache repository of `remote`, created if needed, holding its lock. */
export async function withAssetRepo<T>(
  cacheDir: string,
  remote: string,
  fn: (repo: AssetRepo) => Promise<T>,
  options: { lockTimeoutMs?: number } = {},
): Promise<T> {
  const { gitDir, lock } = cacheRepoPaths(cacheDir, remote)
  const tmp = join(cacheDir, 'tmp')
  try {
    await mkdir(join(cacheDir, 'repos'), { recursive: true })
    await mkdir(tmp, { recursive: true })
  } catch (err) {
    throw new ToolReplayError(
      ErrorCodes.STORE_IO,
      `Cannot create the assets cache ${cacheDir}: ${(err as Error).message}. Set --cache or TOOL_REPLAY_ASSETS_CACHE to a writable folder.`,
      {
        cause: err,
      },
    )
  }
  return withFileLock(
    lock,
    async () => {
      await ensureRepo(gitDir, remote, tmp)
      return fn(new AssetRepo(gitDir, remote, tmp))
    },
    { what: `the assets cache of ${remote}`, ...(options.lockTimeoutMs !== undefined ? { timeoutMs: options.lockTimeoutMs } : {}) },
  )
}

/** Creates the bare repository atomically (made aside, then renamed into place), so a half-made one is never used. */
async function ensureRepo(gitDir: string, remote: string, tmp: string): Promise<void> {
  if (await stat(join(gitDir, 'HEAD')).catch(() => undefined)) return
  const aside = join(tmp, `init-${randomBytes(6).toString('hex')}.git`)
  try {
    await git(['init', '--quiet', '--bare', aside])
    // The first `fetch --filter` marks origin as the promisor remote: the blobs a restore needs come from it.
    await git(['remote', 'add', 'origin', remote], { gitDir: aside })
    await rm(gitDir, { recursive: true, force: true })
    await rename(aside, gitDir)
  } finally {
    await rm(aside, { recursive: true, force: true })
  }
}
