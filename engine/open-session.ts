/** Opening a session: its options checked before anything is read, the trace to replay opened, the recording begun. */
import { parseDurability } from '../store/index.ts'
import { assertTraceName, ErrorCodes, parseJsonPath, ToolReplayError, TRACE_FORMAT_VERSION } from '../trace/index.ts'
import { openReplaySource, type ReplaySource } from './replay-source.ts'
import { Session } from './session.ts'
import { MODES, type SessionOptions } from './session-options.ts'

/** Opens a session: loads the trace for replay/update, starts a recording for record/update/recordAs. */
export async function openSession(options: SessionOptions): Promise<Session> {
  if (!MODES.includes(options.mode)) {
    throw new ToolReplayError(ErrorCodes.INVALID_OPTION, `Unknown mode "${String(options.mode)}". Use one of: ${MODES.join(', ')}.`)
  }
  assertTraceName(options.trace)
  if (options.recordAs !== undefined) assertTraceName(options.recordAs, 'recordAs trace name')
  const durability = parseDurability(options.durability)
  // Parsed now so a typo in a path fails the session at once instead of silently redacting or ignoring nothing.
  for (const p of [...(options.redaction?.bodyPaths ?? []), ...(options.identity?.ignoreBodyPaths ?? [])]) parseJsonPath(p)
  if (options.tail === 'live' && !(options.mode === 'replay' && options.recordAs)) {
    throw new ToolReplayError(ErrorCodes.INVALID_OPTION, 'tail "live" needs replay mode with recordAs (the live tail is recorded there).')
  }
  const identity = options.identity ?? {}
  let source: ReplaySource | undefined
  const preload = options.preload ?? 'auto'
  if (options.mode === 'replay') source = await openReplaySource(options.store, options.trace, identity, preload)
  if (options.mode === 'update' && (await options.store.hasTrace(options.trace)))
    source = await openReplaySource(options.store, options.trace, identity, preload)
  let recordName: string | undefined
  if (options.mode === 'record' || options.mode === 'update') recordName = options.trace
  if (options.mode === 'replay' && options.recordAs) recordName = options.recordAs
  const labels: Record<string, string> = { ...options.labels }
  if (options.mode === 'replay' && recordName) labels.observedAgainst = options.trace
  // A recording made with faults names its seed, so a replay of it can say which seed it reproduces.
  if (options.faults && (options.mode === 'record' || options.mode === 'update')) labels.faultsSeed = options.faults.seed
  const recording = recordName
    ? await options.store.beginTrace({ name: recordName, format: TRACE_FORMAT_VERSION, ...(Object.keys(labels).length > 0 ? { labels } : {}) }, { durability })
    : undefined
  return new Session({ options, source, recording })
}
