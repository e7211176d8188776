import { resolve } from 'node:path'
import { type AssetsStatus, assetsStatus, defaultAssetsCacheDir, POINTER_FILE, type PushFinding, pushAssets, restoreAssets } from '../../assets/index.ts'
import type { TraceStore } from '../../store/index.ts'
import { ErrorCodes, isToolReplayError, ToolReplayError } from '../../trace/index.ts'
import { table } from '../format.ts'
import { boundHeapGrowth } from '../heap-growth.ts'
import { withExistingStore, withStore } from '../open-store.ts'
import type { Io } from '../output.ts'
import { redactionFromArgs, redactionOptions } from '../redaction-flags.ts'
import type { Args, CommandModule } from './command.ts'
import { DIFF_EXIT_DIFFERENT } from './diff.ts'

/** The flags each action takes besides the shared ones; any other is refused, so a misplaced flag never silently does nothing. */
const ACTION_FLAGS: Record<string, string[]> = {
  restore: ['force'],
  push: ['remote', 'tag', 'redact-header', 'redact-query', 'redact-body-path', 'config'],
  status: ['check-remote', 'exit-code'],
}

/**
 * `tr-proxy assets restore|push|status`: recordings shared through a git assets repository, pinned by
 * `tool-replay.assets.json` (remote, tag, traces with their digests) committed with the app.
 */
export const assetsCommand: CommandModule = {
  command: 'assets <action> [traces..]',
  describe:
    'Recordings in a git assets repository pinned by tool-replay.assets.json: restore (fetch the pinned traces into the cache and the store), push (scan, commit, tag, update the pointer), status (what differs)',
  builder: (y) =>
    redactionOptions(y)
      .positional('action', { choices: ['restore', 'push', 'status'], describe: 'restore, push [TRACE...], or status' })
      .positional('traces', { type: 'string', array: true, describe: 'push: the traces to push (default: the ones the pointer names)' })
      .option('pointer', { type: 'string', default: POINTER_FILE, describe: 'The pointer file' })
      .option('cache', { type: 'string', describe: 'The assets cache (default: $TOOL_REPLAY_ASSETS_CACHE, else ~/.cache/tool-replay/assets)' })
      .option('lock-timeout-ms', { type: 'number', describe: 'Wait at most this long for another process using the cache (default 300000)' })
      .option('force', { type: 'boolean', describe: 'restore: replace store traces that differ from the pinned ones' })
      .option('remote', { type: 'string', describe: 'push: the assets repository (git URL or path), when there is no pointer yet' })
      .option('tag', { type: 'string', describe: 'push: the tag to push under (default: tool-replay/<tree id>, named after the content)' })
      .option('check-remote', { type: 'boolean', describe: 'status: also ask the remote whether it has the pinned tag' })
      .option('exit-code', { type: 'boolean', describe: `status: exit ${DIFF_EXIT_DIFFERENT} when anything differs (as diff --exit-code)` }),
  run: async (args, io) => {
    boundHeapGrowth()
    const action = String(args.action)
    checkFlags(args, action)
    const traces = ((args.traces as unknown[] | undefined) ?? []).map(String)
    if (traces.length > 0 && action !== 'push')
      throw new ToolReplayError(ErrorCodes.INVALID_OPTION, `\`tr-proxy assets ${action}\` takes no trace names: it works on the ones the pointer names.`)
    const lockTimeoutMs = args['lock-timeout-ms']
    if (lockTimeoutMs !== undefined && !(typeof lockTimeoutMs === 'number' && Number.isSafeInteger(lockTimeoutMs) && lockTimeoutMs >= 0)) {
      throw new ToolReplayError(ErrorCodes.INVALID_OPTION, `Invalid --lock-timeout-ms ${String(lockTimeoutMs)}: give a whole number of milliseconds.`)
    }
    const common = {
      pointerFile: resolve(String(args.pointer)),
      cacheDir: resolve(typeof args.cache === 'string' && args.cache !== '' ? args.cache : defaultAssetsCacheDir()),
      ...(typeof lockTimeoutMs === 'number' ? { lockTimeoutMs } : {}),
    }
    if (action === 'restore') return withStore({ store: args.store }, (store) => restore(io, args, { ...common, store }))
    if (action === 'push') return withExistingStore({ store: args.store }, (store) => push(io, args, { ...common, store, traces }))
    return withOptionalStore(args, (store) => status(io, args, { ...common, store }))
  },
}

function checkFlags(args: Args, action: string): void {
  for (const [other, flags] of Object.entries(ACTION_FLAGS)) {
    if (other === action) continue
    for (const flag of flags) {
      const given = args[flag]
      if (given !== undefined && !(Array.isArray(given) && given.length === 0) && !(ACTION_FLAGS[action] ?? []).includes(flag)) {
        throw new ToolReplayError(ErrorCodes.INVALID_OPTION, `--${flag} is for \`tr-proxy assets ${other}\`, not ${action}.`)
      }
    }
  }
}

async function restore(io: Io, args: Args, options: Parameters<typeof restoreAssets>[0]): Promise<number> {
  const r = await restoreAssets({ ...options, force: Boolean(args.force) })
  if (args.json) {
    io.out(JSON.stringify({ ok: true, ...r }))
    return 0
  }
  io.out(`Restored ${r.traces.length} trace(s) of tag "${r.tag}" from ${r.remote} (${r.fetched ? 'fetched' : 'the cache already held it'}):`)
  io.out(table(r.traces.map((t) => [`  ${t.action}`, t.name, t.digest.slice(0, 12)])))
  return 0
}

async function push(io: Io, args: Args, options: Omit<Parameters<typeof pushAssets>[0], 'redaction'>): Promise<number> {
  const redaction = await redactionFromArgs(args)
  let r: Awaited<ReturnType<typeof pushAssets>>
  try {
    r = await pushAssets({
      ...options,
      redaction,
      ...(typeof args.remote === 'string' ? { remote: args.remote } : {}),
      ...(typeof args.tag === 'string' ? { tag: args.tag } : {}),
    })
  } catch (err) {
    // As `tr-proxy scan`: every finding, masked, before the error.
    if (isToolReplayError(err, ErrorCodes.SECRET_FOUND) && !args.json) {
      for (const f of (err.details?.findings ?? []) as PushFinding[])
        io.out(`${f.source}: trace "${f.trace}"${f.seq === undefined ? '' : ` #${f.seq}`} ${f.side} ${f.where}: ${f.kind} ${f.preview}`)
    }
    throw err
  }
  if (args.json) io.out(JSON.stringify({ ok: true, ...r }))
  else if (r.created)
    io.out(
      `Pushed ${r.traces.length} trace(s) to ${r.remote} as tag "${r.tag}" (commit ${r.commit.slice(0, 12)}); ${options.pointerFile} now pins it: commit it.`,
    )
  else io.out(`Tag "${r.tag}" of ${r.remote} already holds these traces: nothing pushed; ${options.pointerFile} pins it.`)
  return 0
}

async function status(io: Io, args: Args, options: Parameters<typeof assetsStatus>[0]): Promise<number> {
  const s = await assetsStatus({ ...options, remote: Boolean(args['check-remote']) })
  io.out(args.json ? JSON.stringify({ ok: true, ...s }) : formatStatus(s))
  return args['exit-code'] && s.differs ? DIFF_EXIT_DIFFERENT : 0
}

function formatStatus(s: AssetsStatus): string {
  const where =
    s.tag === undefined
      ? 'no tag yet (push first)'
      : `tag "${s.tag}" (${s.cached ? 'in the cache' : 'not in the cache'}${s.remoteHasTag === false ? '; NOT on the remote' : s.remoteHasTag ? '; on the remote' : ''})`
  const advice = { same: '', changed: 'differs from the pinned one: push it, or restore --force', missing: 'not in the store: restore it' }
  const rows = s.traces.map((t) => [`  ${t.state}`, t.name, t.pinned.slice(0, 12), advice[t.state]])
  return [`assets: ${s.remote} ${where}`, ...(rows.length > 0 ? [table(rows)] : ['  the pointer names no traces'])].join('\n')
}

/** Status reads the store when there is one; a clone that never recorded or restored has none (every trace is missing). */
async function withOptionalStore<T>(args: Args, fn: (store: TraceStore | undefined) => Promise<T>): Promise<T> {
  try {
    return await withExistingStore({ store: args.store }, (store) => fn(store))
  } catch (err) {
    if (isToolReplayError(err, ErrorCodes.STORE_NOT_FOUND)) return fn(undefined)
    throw err
  }
}
