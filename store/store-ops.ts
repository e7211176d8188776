/**
 * The primitive operations a store backend provides: the LevelDB backend in its owning process, the same
 * operations over the store's socket in every other process, and the in-memory store. Everything above them
 * (reading a trace lazily, verifying bodies, streaming big bodies in pieces, recordings) is written once, in
 * trace-reader.ts and trace-store-impl.ts, for every backend.
 *
 * Every operation is idempotent under resend (caller-chosen ids, seq-keyed exchanges, content-addressed bodies
 * and pieces): that is what lets a client resend a request whose answer was lost with a store owner.
 */
import { hostname } from 'node:os'
import { type AppRun, type Exchange, type Outcome, sha256, type Trace, type TraceMeta } from '../trace/index.ts'
import type { Durability } from './durability.ts'

/** Bodies up to this size are stored whole, inside the database. */
export const INLINE_BODY_MAX = 16 * 1024

/**
 * Bigger bodies are stored as pieces of up to this size, each addressed by its SHA-256 (in the LevelDB store,
 * as files beside the database, read with plain reads: memory-mapped table files would count every byte a
 * replay reads into the process's resident memory).
 */
export const PIECE_SIZE = 1024 * 1024

/** How a body bigger than INLINE_BODY_MAX is stored: its pieces in order. */
export interface BodyManifest {
  size: number
  pieces: Array<{ sha256: string; size: number }>
}

/** Who is writing a recording, so `ls` can tell a live recording from one whose process died. */
export interface RecordingOwner {
  pid: number
  host: string
}

/** How a recording is written, chosen when it begins (and kept with it, so every owner of the store honours it). */
export interface RecordingOptions {
  /** Default 'write'; 'fsync' confirms each append only once its group commit is synced (store/durability.ts). */
  durability?: Durability
}

/** How a backend begins a trace: a recording's options, and whether this store recorded it. */
export interface BeginOptions extends RecordingOptions {
  /**
   * False for a trace put in batches from elsewhere (an imported file): its command was not run by a recording
   * of this store, so the inspector asks before running it (inspector/command-gate.ts). Default true.
   */
  recorded?: boolean
}

/** What gc removed (or, in a dry run, would remove). */
export interface GcReport {
  dryRun: boolean
  /** Bodies no trace references (stored inside the database or as pieces). */
  bodies: number
  /** Piece files no kept body uses. */
  pieces: number
  /** Bytes of those bodies kept inside the database, plus the piece files' sizes. */
  bytes: number
  /** Piece files nothing references yet, kept because a recording still running (or gc itself) is newer. */
  keptRecent: number
}

/**
 * A trace as listed: `complete` once its recording closed; `recording` while the process writing it is
 * alive; `partial` when that process died first.
 */
export interface TraceSummary {
  name: string
  /** Internal id; a re-recording gets a new id and replaces the name only when it closes. */
  id: string
  status: 'complete' | 'recording' | 'partial'
  exchanges: number
  /** ISO time the recording started (store-only bookkeeping; never exported). */
  createdAt: string
}

/** What a trace id holds, without its exchanges. */
export interface TraceInfo {
  id: string
  name: string
  meta: TraceMeta
  status: 'recording' | 'complete'
  createdAt: string
  /** Exchanges stored so far. */
  count: number
  /** Sum of the sizes of the bodies the exchanges reference (shared bodies counted once per reference). */
  bodyBytes: number
  /** True when the store keeps a request-identity index for this trace (traces written by this version). */
  indexed: boolean
  /** The identity rules (IDENTITY_RULES) that index was made with; absent when written before they were kept. */
  identityRules?: number
  /**
   * True when a recording in this store wrote the trace (record, replay --record-as), false when it was put
   * whole (import, fork) or stored before this was kept: the inspector runs a recorded command only when one
   * of this store's own recordings ran it.
   */
  recorded: boolean
  owner?: RecordingOwner
}

/** A stored body: its bytes, or the manifest of its pieces. */
export type StoredBody = { kind: 'bytes'; bytes: Uint8Array } | { kind: 'pieces'; manifest: BodyManifest }

/** The operations. Keys and ids are opaque strings chosen by the caller. */
export interface StoreOps {
  readonly location: string
  listTraces(): Promise<TraceSummary[]>
  /** The id of the complete trace listed under `name`. */
  completeId(name: string): Promise<string | undefined>
  /** Recording ids (complete or not) that carry `name`, newest first. */
  recordingIds(name: string): Promise<string[]>
  traceInfo(id: string): Promise<TraceInfo | undefined>
  /** Up to `limit` exchanges of trace `id` with seq >= `fromSeq`, in seq order. */
  exchanges(id: string, fromSeq: number, limit: number): Promise<Exchange[]>
  /** Seqs of the exchanges of trace `id` whose request has this identity key (default identity options). */
  lookup(id: string, key: string): Promise<number[]>
  /** Up to `limit` identity keys of trace `id` after `afterKey` (exclusive), each with its seqs. */
  identityKeys(id: string, afterKey: string, limit: number): Promise<Array<[key: string, seqs: number[]]>>
  /**
   * A stored body; `size`, when the caller knows it, says where to look first (a body over INLINE_BODY_MAX is
   * stored as pieces: its manifest is read without first missing the inline key).
   */
  body(digest: string, size?: number): Promise<StoredBody | undefined>
  piece(sha256: string): Promise<Uint8Array | undefined>
  putPiece(sha256: string, bytes: Uint8Array): Promise<void>
  beginTrace(id: string, meta: TraceMeta, createdAt: string, owner: RecordingOwner, options?: BeginOptions): Promise<void>
  /** Stores one exchange, the small bodies it references (`bodies`) and the manifests of big ones whose pieces were put. */
  append(id: string, exchange: Exchange, bodies: ReadonlyMap<string, Uint8Array>, manifests: ReadonlyMap<string, BodyManifest>): Promise<void>
  /**
   * Makes the recording the complete trace of its name; with `overwrite: false`, TR_TRACE_EXISTS if that name is
   * taken. `app` (the command that made it and how it ended) goes into its meta in the same write.
   */
  closeRecording(id: string, options?: { overwrite?: boolean; app?: AppRun }): Promise<void>
  /** Stores exchanges of a recording being imported (putTrace of a big trace), one batch per call. */
  appendChunk(id: string, exchanges: Exchange[], bodies: ReadonlyMap<string, Uint8Array>): Promise<void>
  putTrace(trace: Trace, id: string, createdAt: string, overwrite: boolean): Promise<void>
  deleteTrace(name: string): Promise<boolean>
  /** Deletes a recording that is not the complete trace of its name (a partial one). */
  deleteRecording(id: string): Promise<boolean>
  /** Removes the bodies and pieces no trace references (gc.ts); with `dryRun`, only counts them. */
  gc(options: { dryRun: boolean }): Promise<GcReport>
}

/** True while the process that owns a recording is alive on this host. */
export function ownerAlive(owner: RecordingOwner | undefined): boolean {
  if (!owner || owner.host !== hostname()) return false
  try {
    process.kill(owner.pid, 0)
    return true
  } catch (err) {
    // EPERM: it exists but belongs to someone else.
    return (err as NodeJS.ErrnoException).code === 'EPERM'
  }
}

/** Digests of every body an exchange references. */
export function refsOf(x: Exchange): string[] {
  const out: string[] = []
  if (x.request.body) out.push(x.request.body.digest)
  outcomeRefs(x.outcome, out)
  // A faulted exchange also keeps what the upstream really sent.
  if (x.fault?.upstream) outcomeRefs(x.fault.upstream, out)
  if (x.websocket) for (const m of x.websocket.messages) out.push(m.body.digest)
  return out
}

function outcomeRefs(o: Outcome, out: string[]): void {
  if (o.kind === 'response') out.push(o.response.body.digest)
  else if (o.error.partial) out.push(o.error.partial.body.digest)
}

/** A body too big to store inline, cut into pieces: its manifest and each piece with its digest. */
export function splitIntoPieces(bytes: Uint8Array): { manifest: BodyManifest; pieces: Array<[sha256: string, bytes: Uint8Array]> } {
  const manifest: BodyManifest = { size: bytes.byteLength, pieces: [] }
  const pieces: Array<[string, Uint8Array]> = []
  for (let offset = 0; offset < bytes.byteLength; offset += PIECE_SIZE) {
    const piece = bytes.subarray(offset, offset + PIECE_SIZE)
    const sha = sha256(piece)
    manifest.pieces.push({ sha256: sha, size: piece.byteLength })
    pieces.push([sha, piece])
  }
  return { manifest, pieces }
}
