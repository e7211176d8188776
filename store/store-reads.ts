/**
 * The read side of StoreOps written once over a key-value reader: the LevelDB backend reads through LevelDB,
 * the read-only file backend (file-backend.ts) through its own reading of LevelDB's files, and fsck's rescue
 * through a view of whatever files are left. The key layout is level-backend.ts's.
 */
import { ErrorCodes, type Exchange, ToolReplayError } from '../trace/index.ts'
import { piecePath, readPiece } from './pieces.ts'
import { type BodyManifest, INLINE_BODY_MAX, ownerAlive, type RecordingOwner, type StoredBody, type TraceInfo, type TraceSummary } from './store-ops.ts'

/** A key range: at least `gte` or `gt`, always below `lt`. Keys are the store's utf8 keys. */
export interface KvRange {
  gte?: string
  gt?: string
  lt: string
  limit?: number
}

/** What the reads need of a key-value store. `visit` returns false to stop. */
export interface KvRead {
  get(key: string): Promise<Uint8Array | undefined>
  scan(range: KvRange, visit: (key: string, value: Uint8Array) => boolean | undefined): Promise<void>
}

/** What `m!<id>` holds. Stores written before count/indexed existed lack them. */
export interface StoredMeta {
  id: string
  name: string
  meta: TraceInfo['meta']
  createdAt: string
  status: 'recording' | 'complete'
  count?: number
  bodyBytes?: number
  indexed?: boolean
  /** The identity rules the index was made with (IDENTITY_RULES); absent in stores written before it was kept. */
  identityRules?: number
  /** Written by a recording of this store (beginTrace), not put whole. */
  recorded?: boolean
  owner?: RecordingOwner
  /** Set while a recording asked for synced appends (store/durability.ts); dropped when it closes. */
  durability?: 'fsync'
  /**
   * While a recording is open: how many exchanges it holds, kept while each came with a seq above every earlier
   * one (an import stages them so), so closing it need not count them with a scan of every exchange. Dropped
   * at the first that did not (a recording's appends land as their exchanges finish): closing then counts.
   * `count` is the recording's count it was kept at: it is trusted only while the two agree.
   */
  ordered?: { exchanges: number; count: number }
}

const pad = (seq: number) => String(seq).padStart(10, '0')

/** Key builders, exported for tests that damage a store on purpose. */
export const storeKeys = {
  body: (digest: string) => `b!${digest}`,
  manifest: (digest: string) => `B!${digest}`,
  meta: (id: string) => `m!${id}`,
  exchange: (id: string, seq: number) => `x!${id}!${pad(seq)}`,
  identity: (id: string, key: string, seq: number) => `k!${id}!${key}!${pad(seq)}`,
  name: (name: string) => `n!${name}`,
}

/** `"` sorts right after `!`, so [`p!`, `p"`) is exactly the keys under prefix p. */
export const prefixRange = (prefix: string): KvRange => ({ gte: prefix, lt: `${prefix.slice(0, -1)}"` })

const decoder = new TextDecoder()

/** The read operations of a store over `kv`. */
export class StoreReads {
  readonly location: string
  readonly #kv: KvRead
  readonly #piecesDir: string
  /** Piece folders found real (not links) on an earlier read. */
  readonly #pieceDirs = new Set<string>()

  constructor(location: string, kv: KvRead, piecesDir: string) {
    this.location = location
    this.#kv = kv
    this.#piecesDir = piecesDir
  }

  async listTraces(): Promise<TraceSummary[]> {
    const metas = await this.metas()
    const out: TraceSummary[] = []
    for (const m of metas) {
      const status = m.status === 'complete' ? 'complete' : ownerAlive(m.owner) ? 'recording' : 'partial'
      out.push({ name: m.name, id: m.id, status, exchanges: m.count ?? (await this.countExchanges(m.id)), createdAt: m.createdAt })
    }
    return out.sort((a, b) => a.name.localeCompare(b.name) || a.createdAt.localeCompare(b.createdAt))
  }

  /** Every trace's stored metadata, complete or not. */
  async metas(): Promise<StoredMeta[]> {
    const metas: StoredMeta[] = []
    await this.#kv.scan(prefixRange('m!'), (key, value) => {
      metas.push(this.parse<StoredMeta>(key, value))
      return true
    })
    return metas
  }

  async completeId(name: string): Promise<string | undefined> {
    const v = await this.#kv.get(storeKeys.name(name))
    return v === undefined ? undefined : decoder.decode(v)
  }

  async recordingIds(name: string): Promise<string[]> {
    const metas = (await this.metas()).filter((m) => m.name === name)
    return metas.sort((a, b) => b.createdAt.localeCompare(a.createdAt) || b.id.localeCompare(a.id)).map((m) => m.id)
  }

  async traceInfo(id: string): Promise<TraceInfo | undefined> {
    const m = await this.getMeta(id)
    if (m === undefined) return undefined
    const info: TraceInfo = {
      id,
      name: m.name,
      meta: m.meta,
      status: m.status,
      createdAt: m.createdAt,
      count: m.count ?? (await this.countExchanges(id)),
      bodyBytes: m.bodyBytes ?? 0,
      indexed: m.indexed === true,
      recorded: m.recorded === true,
    }
    if (m.owner) info.owner = m.owner
    if (m.identityRules !== undefined) info.identityRules = m.identityRules
    return info
  }

  async exchanges(id: string, fromSeq: number, limit: number): Promise<Exchange[]> {
    const out: Exchange[] = []
    if (limit <= 0) return out
    await this.#kv.scan({ gte: storeKeys.exchange(id, fromSeq), lt: `x!${id}"` }, (key, value) => {
      out.push(this.parseExchange(key, value))
      return out.length < limit
    })
    return out
  }

  async lookup(id: string, key: string): Promise<number[]> {
    const out: number[] = []
    await this.#kv.scan(prefixRange(`k!${id}!${key}!`), (k) => {
      out.push(Number(k.slice(k.lastIndexOf('!') + 1)))
      return true
    })
    return out
  }

  async identityKeys(id: string, afterKey: string, limit: number): Promise<Array<[string, number[]]>> {
    const prefix = `k!${id}!`
    const out: Array<[string, number[]]> = []
    // "~" sorts after every hex digit: start past every seq of `afterKey`.
    const gt = afterKey === '' ? undefined : `${prefix}${afterKey}!~`
    await this.#kv.scan({ ...(gt ? { gt } : { gte: prefix }), lt: `k!${id}"` }, (k) => {
      const rest = k.slice(prefix.length)
      const bang = rest.lastIndexOf('!')
      const key = rest.slice(0, bang)
      const seq = Number(rest.slice(bang + 1))
      const last = out.at(-1)
      if (last && last[0] === key) last[1].push(seq)
      else {
        if (out.length === limit) return false
        out.push([key, [seq]])
      }
      return true
    })
    return out
  }

  async body(digest: string, size?: number): Promise<StoredBody | undefined> {
    const piecesFirst = size !== undefined && size > INLINE_BODY_MAX
    if (piecesFirst) {
      const pieces = await this.#manifest(digest)
      if (pieces) return pieces
    }
    const bytes = await this.#kv.get(storeKeys.body(digest))
    if (bytes !== undefined) return { kind: 'bytes', bytes: new Uint8Array(bytes) }
    return piecesFirst ? undefined : this.#manifest(digest)
  }

  async #manifest(digest: string): Promise<StoredBody | undefined> {
    const key = storeKeys.manifest(digest)
    const manifest = await this.#kv.get(key)
    return manifest === undefined ? undefined : { kind: 'pieces', manifest: this.parse<BodyManifest>(key, manifest) }
  }

  piece(sha: string): Promise<Uint8Array | undefined> {
    return readPiece(this.location, this.#piecesDir, sha, this.#pieceDirs)
  }

  /** Where a piece lives (for messages and gc). */
  piecePath(sha: string): string {
    return piecePath(this.#piecesDir, sha)
  }

  async countExchanges(id: string): Promise<number> {
    let n = 0
    await this.#kv.scan(prefixRange(`x!${id}!`), () => {
      n++
      return true
    })
    return n
  }

  async getMeta(id: string): Promise<StoredMeta | undefined> {
    const key = storeKeys.meta(id)
    const v = await this.#kv.get(key)
    return v === undefined ? undefined : this.parse<StoredMeta>(key, v)
  }

  parse<T>(key: string, value: Uint8Array): T {
    try {
      const v = JSON.parse(decoder.decode(value)) as unknown
      if (v === null || typeof v !== 'object') throw new TypeError('not a JSON object')
      return v as T
    } catch (err) {
      throw this.corrupt(key, `its value is not valid JSON (${(err as Error).message})`, err)
    }
  }

  parseExchange(key: string, value: Uint8Array): Exchange {
    const x = this.parse<Exchange>(key, value)
    // Enough shape to fail here, naming the key, rather than deep inside a replay.
    if (typeof x.seq !== 'number' || typeof x.request?.url !== 'string' || (x.outcome?.kind !== 'response' && x.outcome?.kind !== 'error')) {
      throw this.corrupt(key, 'its value is not an exchange')
    }
    if (key !== storeKeys.exchange(key.slice(2, key.lastIndexOf('!')), x.seq)) throw this.corrupt(key, `it holds exchange #${x.seq}, not the one its key names`)
    return x
  }

  corrupt(key: string, why: string, cause?: unknown): ToolReplayError {
    return new ToolReplayError(
      ErrorCodes.STORE_CORRUPT,
      `The trace store at ${this.location} is damaged at key "${key}": ${why}. Run \`tr-proxy fsck --store ${this.location}\` to see what is intact, export it, then delete the affected trace (\`tr-proxy rm <name>\`) and re-record or re-import it.`,
      { cause, details: { location: this.location, key } },
    )
  }
}
