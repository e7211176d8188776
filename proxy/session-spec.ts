/**
 * What opening a named session on a running proxy takes (the control API's `POST /sessions` body), checked
 * field by field before anything opens. Pure.
 */
import { MODES, type Mode, type SessionOptions } from '../engine/index.ts'
import { assertTraceName, ErrorCodes, ToolReplayError } from '../trace/index.ts'
import { assertSessionName } from './session-choice.ts'

/** A named session to open: its name on the proxy, and the engine session's own options (typed as SESSION_OPTIONS declares them). */
export interface SessionSpec extends Pick<SessionOptions, 'recordAs' | 'tail' | 'keepUnused'> {
  /** Name requests use to pick it (x-tool-replay-session, or http://NAME:x@host:port). */
  name: string
  mode: Mode
  trace: string
}

const FIELDS = new Set(['name', 'mode', 'trace', 'recordAs', 'tail', 'keepUnused'])

/**
 * Checks a parsed body: `{ name, trace, mode?, recordAs?, tail?, keepUnused? }` (mode defaults to replay;
 * the trace defaults to the name). Unknown fields are refused rather than ignored, so a typo cannot turn a
 * replay into something else. Throws TR_INVALID_OPTION naming the field.
 */
export function parseSessionSpec(body: unknown): SessionSpec {
  const bad = (why: string) =>
    new ToolReplayError(
      ErrorCodes.INVALID_OPTION,
      `Invalid session request: ${why}. Send JSON like {"name":"checkout","trace":"checkout","mode":"replay"} (optional: recordAs, tail, keepUnused).`,
    )
  if (body === null || typeof body !== 'object' || Array.isArray(body)) throw bad('the body is not a JSON object')
  const o = body as Record<string, unknown>
  const unknown = Object.keys(o).filter((k) => !FIELDS.has(k))
  if (unknown.length > 0) throw bad(`unknown field(s) ${unknown.map((k) => `"${k}"`).join(', ')}`)
  assertSessionName(o.name)
  const mode = o.mode ?? 'replay'
  if (!MODES.includes(mode as Mode)) throw bad(`"mode" ${JSON.stringify(mode)} is not one of ${MODES.join(', ')}`)
  const trace = o.trace ?? o.name
  assertTraceName(trace)
  if (o.recordAs !== undefined) assertTraceName(o.recordAs, 'recordAs trace name')
  if (o.tail !== undefined && o.tail !== 'strict' && o.tail !== 'live') throw bad(`"tail" ${JSON.stringify(o.tail)} is not "strict" or "live"`)
  if (o.keepUnused !== undefined && typeof o.keepUnused !== 'boolean') throw bad('"keepUnused" is not a boolean')
  return {
    name: o.name,
    mode: mode as Mode,
    trace,
    ...(o.recordAs !== undefined ? { recordAs: o.recordAs as string } : {}),
    ...(o.tail !== undefined ? { tail: o.tail as SessionSpec['tail'] } : {}),
    ...(o.keepUnused !== undefined ? { keepUnused: o.keepUnused } : {}),
  }
}

/**
 * The engine options of a spec on top of the proxy's shared ones (redaction, identity, labels, ...). The
 * serve's --faults stay with its default session: a named session's verdict would have nobody to report to.
 */
export function sessionOptionsOf(spec: SessionSpec, base: Omit<SessionOptions, 'store'>): Omit<SessionOptions, 'store'> {
  const { mode: _mode, trace: _trace, recordAs: _recordAs, tail: _tail, keepUnused: _keepUnused, faults: _faults, ...shared } = base
  const { name: _name, ...own } = spec
  return { ...shared, ...own }
}
