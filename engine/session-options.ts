/** What a session is opened with: its mode and options. */
import type { Durability, TraceStore } from '../store/index.ts'
import type { IdentityOptions } from '../trace/index.ts'
import type { SessionFaultsOptions } from './fault-host/session-faults.ts'
import type { RedactionOptions } from './redaction.ts'

/**
 * - record: forward every request live and store it (a new recording replaces the trace when it closes).
 * - replay: serve from the trace only, never open a connection; fail closed on anything unrecorded.
 * - passthrough: forward live, store nothing.
 * - update: replay what matches, forward and record what is missing; the result replaces the trace.
 */
export type Mode = 'record' | 'replay' | 'passthrough' | 'update'
export const MODES: readonly Mode[] = ['record', 'replay', 'passthrough', 'update']

export interface SessionOptions {
  mode: Mode
  /** Trace name. */
  trace: string
  store: TraceStore
  identity?: IdentityOptions
  redaction?: RedactionOptions
  /** In replay: also record what the app did (replayed exchanges and misses) as this trace, for diff. */
  recordAs?: string
  /** In replay with recordAs: after the first unmatched request, forward live and record ('live'). */
  tail?: 'strict' | 'live'
  /** Update mode: keep the recordings the run did not request (after the others) instead of dropping them. */
  keepUnused?: boolean
  /** Where the engine's warnings go (a live tail starting). Default: process.emitWarning. */
  onWarning?: (message: string) => void
  /** Labels stored with a recorded trace, e.g. { recordedWith: 'proxy' }. */
  labels?: Record<string, string>
  /** Largest response body kept whole for JSON body-path redaction (default 64 MiB). */
  maxBodyBytes?: number
  /**
   * 'auto' (default): a trace of up to 50,000 exchanges and 64 MiB of bodies is replayed from memory, a bigger
   * one through the store's index with bodies read as played. 'none': always through the store (memory stays
   * flat; each request costs a store read).
   */
  preload?: 'auto' | 'none'
  /** Fault rules and their seed: requests that go live may be faulted (see session-faults.ts). */
  faults?: SessionFaultsOptions
  /**
   * How far each recorded exchange is on its way to disk before its client sees the answer end: 'write'
   * (default) survives the process being killed, 'fsync' a power cut too (docs/durability.md).
   */
  durability?: Durability
}
