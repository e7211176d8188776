/** What a session is opened with: its mode and options, and the options a command line gives it, declared once. */
import { DURABILITY_LEVELS, DURABILITY_OPTION, parseDurability, type TraceStore } from '../store/index.ts'
import type { IdentityOptions, OptionDeclaration, OptionValues } from '../trace/index.ts'
import type { SessionFaultsOptions } from './fault-host/session-faults.ts'
import type { RedactionOptions } from './redaction.ts'
import { DEFAULT_MAX_BODY_BYTES, parseMaxBodyBytes } from './transport-rules.ts'

/**
 * - record: forward every request live and store it (a new recording replaces the trace when it closes).
 * - replay: serve from the trace only, never open a connection; fail closed on anything unrecorded.
 * - passthrough: forward live, store nothing.
 * - update: replay what matches, forward and record what is missing; the result replaces the trace.
 */
export type Mode = 'record' | 'replay' | 'passthrough' | 'update'
export const MODES: readonly Mode[] = ['record', 'replay', 'passthrough', 'update']

/**
 * The session's options a command line gives (record, replay, serve, session, mcp), declared once: flag, type,
 * default, help. SessionOptions takes its types from here; the CLI its flags and help; docs/reference.md its lines.
 */
export const SESSION_OPTIONS = {
  trace: { flag: 'trace', alias: 't', type: 'string', default: 'default', help: 'Trace name' },
  mode: {
    flag: 'mode',
    type: 'string',
    choices: MODES,
    help: 'record: forward and store everything; replay: answer from the trace only, never go live; update: replay what matches, record the rest; passthrough: forward, store nothing',
  },
  recordAs: {
    flag: 'record-as',
    type: 'string',
    help: 'In replay: also record what the app did (replayed exchanges and misses) as this trace, for diff',
  },
  tail: {
    flag: 'tail',
    type: 'string',
    choices: ['strict', 'live'],
    default: 'strict',
    help: 'In replay with --record-as: live = after the first unmatched request go live and record into --record-as (NOT offline)',
  },
  keepUnused: {
    flag: 'keep-unused',
    type: 'boolean',
    default: false,
    help: 'With --mode update: keep the recordings the run did not request (after the others) instead of dropping them',
  },
  maxBodyBytes: {
    flag: 'max-body-bytes',
    type: 'number',
    unit: 'bytes',
    default: DEFAULT_MAX_BODY_BYTES,
    help: 'Largest body held whole: a request body buffered for matching (a larger one is answered 413); an MCP message, one line either way (a longer one is dropped and answered with TR_LINE_TOO_LONG); a body redacted by JSON path, decoded (a larger response is stored as TR_BODY_NOT_REDACTED)',
    parse: parseMaxBodyBytes,
  },
  durability: {
    flag: 'durability',
    type: 'string',
    choices: DURABILITY_LEVELS,
    default: DURABILITY_OPTION.default,
    help: DURABILITY_OPTION.describe,
    parse: (value: unknown) => parseDurability(value),
  },
} as const satisfies Record<string, OptionDeclaration>

type Declared = OptionValues<typeof SESSION_OPTIONS>

export interface SessionOptions extends Pick<Declared, 'recordAs' | 'tail' | 'keepUnused' | 'maxBodyBytes' | 'durability'> {
  mode: Mode
  /** Trace name. */
  trace: string
  store: TraceStore
  identity?: IdentityOptions
  redaction?: RedactionOptions
  /** Where the engine's warnings go (a live tail starting). Default: process.emitWarning. */
  onWarning?: (message: string) => void
  /** Labels stored with a recorded trace, e.g. { recordedWith: 'proxy' }. */
  labels?: Record<string, string>
  /**
   * 'auto' (default): a trace of up to 50,000 exchanges and 64 MiB of bodies is replayed from memory; up to
   * 50,000 exchanges with bigger bodies, the exchanges and small bodies are held and the rest read as played; a
   * bigger trace goes through the store's index with bodies read as played. 'none': always through the store
   * (memory stays flat; each request costs a store read).
   */
  preload?: 'auto' | 'none'
  /** Fault rules and their seed: requests that go live may be faulted (see session-faults.ts). */
  faults?: SessionFaultsOptions
}
