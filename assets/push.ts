/**
 * `tr-proxy assets push`: the suite's traces, exported as trace files, scanned for secrets (the engine's
 * secret scan, as `tr-proxy scan` runs it: one finding and nothing is pushed), committed on top of the
 * pinned tag (other traces of the tag stay as they are, without being downloaded) and pushed under a new tag;
 * then the pointer names that tag and the new digests. Tags are never moved: the default tag is named after
 * the content (`tool-replay/<tree id>`), so pushing the same recordings twice reuses it, and an explicit tag
 * that exists with other content is TR_ASSETS_TAG_EXISTS.
 */
import { readdir, rm } from 'node:fs/promises'
import { join } from 'node:path'
import { type RedactionOptions, type SecretFinding, scanTrace } from '../engine/index.ts'
import { storedTraceSource, TraceFileReader, type TraceStore, withWriteErrors, writeTraceFileFrom } from '../store/index.ts'
import { ErrorCodes, ToolReplayError } from '../trace/index.ts'
import { type AssetRepo, withAssetRepo } from './asset-cache.ts'
import { git } from './git.ts'
import { blobPath, traceFilePath } from './layout.ts'
import { type AssetsPointer, checkRemote, DEFAULT_ASSETS_DIR, DEFAULT_TAG_PREFIX, gitRemote, readPointer, writePointer } from './pointer.ts'

/** Options of `pushAssets`. */
export interface PushOptions {
  pointerFile: string
  store: TraceStore
  cacheDir: string
  /** Traces to push; default: the ones the pointer names. */
  traces?: string[]
  /** The assets repository, when the pointer does not exist yet (it is created). */
  remote?: string
  /** The tag to push under; default `<tagPrefix><first 12 hex of the tree id>`. */
  tag?: string
  /** Also required to be redacted by the scan (as `tr-proxy scan --redact-...`). */
  redaction?: RedactionOptions
  lockTimeoutMs?: number
}

/** What push did. */
export interface PushResult {
  remote: string
  tag: string
  commit: string
  /** False when nothing changed (the pinned tag already holds these traces) or an equal tag existed. */
  created: boolean
  traces: Array<{ name: string; digest: string }>
}

/** A secret found in a trace about to be pushed, and the trace file it is in. */
export type PushFinding = SecretFinding & { source: string }

/** Pushes the traces and updates the pointer. */
export async function pushAssets(options: PushOptions): Promise<PushResult> {
  const pointer = await pointerForPush(options)
  const names = [...new Set(options.traces && options.traces.length > 0 ? options.traces : Object.keys(pointer.traces))].sort()
  if (names.length === 0) {
    throw new ToolReplayError(
      ErrorCodes.INVALID_OPTION,
      `Nothing to push: name the traces (\`tr-proxy assets push TRACE...\`); the pointer ${options.pointerFile} lists none.`,
    )
  }
  const result = await withAssetRepo(
    options.cacheDir,
    gitRemote(pointer.remote, options.pointerFile),
    async (repo) => {
      const staged = await repo.tempDir('push-')
      try {
        const digests = await stage(options.store, names, pointer.dir, staged)
        await scanStaged(staged, pointer.dir, names, options.redaction)
        return { digests, ...(await commitAndPush(repo, pointer, staged, names, options.tag)) }
      } finally {
        await rm(staged, { recursive: true, force: true })
      }
    },
    options.lockTimeoutMs !== undefined ? { lockTimeoutMs: options.lockTimeoutMs } : {},
  )
  const traces = { ...pointer.traces }
  for (const [name, digest] of result.digests) traces[name] = digest
  await writePointer(options.pointerFile, { ...pointer, tag: result.tag, traces })
  return {
    remote: pointer.remote,
    tag: result.tag,
    commit: result.commit,
    created: result.created,
    traces: [...result.digests].map(([name, digest]) => ({ name, digest })),
  }
}

async function pointerForPush(options: PushOptions): Promise<AssetsPointer> {
  try {
    const pointer = await readPointer(options.pointerFile)
    if (options.remote !== undefined && options.remote !== pointer.remote) {
      throw new ToolReplayError(
        ErrorCodes.INVALID_OPTION,
        `--remote ${options.remote} is not the pointer's remote ${pointer.remote}. Edit "remote" in ${options.pointerFile} to move the recordings.`,
      )
    }
    return pointer
  } catch (err) {
    const missing = (err as { cause?: NodeJS.ErrnoException }).cause?.code === 'ENOENT'
    if (!missing || options.remote === undefined) throw err
    const remote = checkRemote(options.remote, (_field, why) => {
      throw new ToolReplayError(ErrorCodes.INVALID_OPTION, `Invalid --remote: it ${why}.`)
    })
    return { remote, dir: DEFAULT_ASSETS_DIR, tagPrefix: DEFAULT_TAG_PREFIX, traces: {} }
  }
}

/** Exports each trace as `<dir>/<name>.trace.json` under `staged` (streamed from the store); returns name → file digest. */
async function stage(store: TraceStore, names: string[], dir: string, staged: string): Promise<Map<string, string>> {
  const digests = new Map<string, string>()
  for (const name of names) {
    const file = join(staged, traceFilePath(dir, name))
    const reader = await store.openTrace(name)
    const written = await withWriteErrors(file, () => writeTraceFileFrom(file, storedTraceSource(reader)))
    digests.set(name, written.digest)
  }
  return digests
}

/** Scans what is about to be committed, read back from the staged files; any finding stops the push. */
async function scanStaged(staged: string, dir: string, names: string[], redaction: RedactionOptions | undefined): Promise<void> {
  const findings: PushFinding[] = []
  const options = redaction ? { redaction } : {}
  for (const name of names) {
    const source = traceFilePath(dir, name)
    // A streamed read, an exchange (and the bodies it references) at a time: the metadata is scanned once,
    // and each exchange's findings are the ones that name it.
    const reader = await TraceFileReader.open(join(staged, source), { refBytes: true })
    const found = scanTrace({ meta: reader.meta, exchanges: [], bodies: new Map() }, options)
    for await (const { exchange, bodies } of reader.exchanges()) {
      found.push(...scanTrace({ meta: reader.meta, exchanges: [exchange], bodies }, options).filter((f) => f.seq !== undefined))
    }
    findings.push(...found.map((f) => ({ ...f, source })))
  }
  if (findings.length === 0) return
  const n = findings.length
  throw new ToolReplayError(
    ErrorCodes.SECRET_FOUND,
    `Not pushed: found ${n} value${n === 1 ? '' : 's'} that look${n === 1 ? 's' : ''} like credentials in the traces to push (${[...new Set(findings.map((f) => f.trace))].join(', ')}). Remove them: re-record with redaction (--redact-header, --redact-query, --redact-body-path or .tool-replay/config.json), or \`tr-proxy rm\` the trace; rotate any key that was real.`,
    { details: { findings } },
  )
}

/** Builds the commit (the pinned tag's tree with the staged files replaced), tags it and pushes the tag. */
async function commitAndPush(
  repo: AssetRepo,
  pointer: AssetsPointer,
  staged: string,
  names: string[],
  explicitTag: string | undefined,
): Promise<{ tag: string; commit: string; created: boolean }> {
  const base = pointer.tag === undefined ? undefined : (await repo.fetchTag(pointer.tag)).commit
  const tree = await buildTree(repo, base, staged, pointer.dir)
  if (base !== undefined && pointer.tag !== undefined && explicitTag === undefined && (await treeOf(repo, base)) === tree) {
    return { tag: pointer.tag, commit: base, created: false }
  }
  const tag = explicitTag ?? `${pointer.tagPrefix}${tree.slice(0, 12)}`
  const existing = (await repo.remoteTag(tag)) ? (await repo.fetchTag(tag)).commit : undefined
  if (existing !== undefined) {
    if ((await treeOf(repo, existing)) === tree) return { tag, commit: existing, created: false }
    throw tagExists(repo.remote, tag)
  }
  const message = `tool-replay: ${names.length} trace(s): ${names.join(', ')}`.slice(0, 2000)
  const commit = (
    await git(['commit-tree', tree, ...(base ? ['-p', base] : []), '-m', message], { gitDir: repo.gitDir, env: await identity(repo.gitDir) })
  ).stdout.trim()
  // --no-thin: a thin pack would download the base's old files to use as delta bases.
  const pushed = await git(['push', '--quiet', '--porcelain', '--no-thin', 'origin', `${commit}:refs/tags/${tag}`], { gitDir: repo.gitDir, okCodes: [1] })
  if (pushed.code !== 0) {
    // Another push made this tag first (rejected: already exists): only fine when it holds the same tree.
    if (/\[rejected\]|already exists/.test(pushed.stdout + pushed.stderr) && (await repo.remoteTag(tag))) {
      const theirs = (await repo.fetchTag(tag)).commit
      if ((await treeOf(repo, theirs)) === tree) return { tag, commit: theirs, created: false }
      throw tagExists(repo.remote, tag)
    }
    throw new ToolReplayError(
      ErrorCodes.ASSETS_GIT_FAILED,
      `git push of tag "${tag}" to ${repo.remote} failed: ${pushed.stderr.trim() || pushed.stdout.trim()}. Check you may push tags there.`,
      {
        details: { stderr: pushed.stderr },
      },
    )
  }
  await git(['update-ref', `refs/tags/${tag}`, commit], { gitDir: repo.gitDir })
  return { tag, commit, created: true }
}

/** The tree of `base` (or an empty one) with every staged file written in; nothing of `base` is downloaded. */
async function buildTree(repo: AssetRepo, base: string | undefined, staged: string, dir: string): Promise<string> {
  const scratch = await repo.tempDir('index-')
  const env = { GIT_INDEX_FILE: join(scratch, 'index') }
  try {
    if (base) await git(['read-tree', base], { gitDir: repo.gitDir, env })
    const paths = await stagedPaths(staged, dir)
    const entries: string[] = []
    // In groups, so thousands of blobs never exceed the command-line limit.
    for (let i = 0; i < paths.length; i += 500) {
      const group = paths.slice(i, i + 500)
      const hashed = await git(['hash-object', '-w', '--no-filters', '--', ...group.map((p) => join(staged, p))], { gitDir: repo.gitDir })
      const oids = hashed.stdout.trim().split('\n')
      group.forEach((p, j) => {
        entries.push(`100644 ${oids[j]}\t${p}\0`)
      })
    }
    await git(['update-index', '-z', '--add', '--index-info'], { gitDir: repo.gitDir, env, input: entries.join('') })
    // --missing-ok: the base's files this clone never downloaded stay on the remote (a plain write-tree would
    // fetch every one of them to check it exists).
    return (await git(['write-tree', '--missing-ok'], { gitDir: repo.gitDir, env })).stdout.trim()
  } finally {
    await rm(scratch, { recursive: true, force: true })
  }
}

/** Repository paths of the staged trace files and blobs. */
async function stagedPaths(staged: string, dir: string): Promise<string[]> {
  const out: string[] = []
  for (const entry of await readdir(join(staged, dir), { withFileTypes: true })) {
    if (entry.isFile()) out.push(`${dir}/${entry.name}`)
    else if (entry.isDirectory() && entry.name === 'blobs') for (const b of await readdir(join(staged, dir, 'blobs'))) out.push(blobPath(dir, b))
  }
  return out.sort()
}

async function treeOf(repo: AssetRepo, commit: string): Promise<string> {
  return (await git(['rev-parse', `${commit}^{tree}`], { gitDir: repo.gitDir })).stdout.trim()
}

/** The committer: git's own configuration, else Tool Replay (a CI machine often has none). */
async function identity(gitDir: string): Promise<Record<string, string>> {
  const configured = await git(['config', '--get', 'user.email'], { gitDir, okCodes: [1] })
  if (configured.code === 0 || process.env.GIT_AUTHOR_EMAIL || process.env.GIT_COMMITTER_EMAIL) return {}
  const who = { name: 'Tool Replay', email: 'tool-replay@localhost' }
  return { GIT_AUTHOR_NAME: who.name, GIT_AUTHOR_EMAIL: who.email, GIT_COMMITTER_NAME: who.name, GIT_COMMITTER_EMAIL: who.email }
}

function tagExists(remote: string, tag: string): ToolReplayError {
  return new ToolReplayError(
    ErrorCodes.ASSETS_TAG_EXISTS,
    `Tag "${tag}" already exists in ${remote} with other recordings; Tool Replay never moves a tag. Push under another --tag, or leave --tag out (the default tag is named after the content).`,
    { details: { remote, tag } },
  )
}
