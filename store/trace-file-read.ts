/**
 * Reading a trace file an exchange at a time (see trace-file.ts for the format): the file is scanned as a
 * stream (json-stream.ts), each exchange checked as it arrives (schema, its bodies' sha256, trace/validate.ts),
 * and the trace digest fed one exchange at a time and compared once the last one is in. Memory holds one
 * exchange, the size of every distinct body seen (refs are checked against it) and a bounded cache of body
 * bytes; a ref whose bytes left the cache is read again from the file.
 */
import { createReadStream } from 'node:fs'
import { type FileHandle, open, readFile, stat } from 'node:fs/promises'
import { dirname, join } from 'node:path'
import { ErrorCodes, type Exchange, exchangeProblem, parseJson, ToolReplayError, type TraceMeta } from '../trace/index.ts'
import { DigestIndex } from './digest-index.ts'
import { JsonObjectStream, JsonStreamError, type JsonStreamEvent } from './json-stream.ts'
import { TraceDigester, type TraceFileExchange, type TraceFileReadOptions } from './trace-file-format.ts'
import { exchangesInWorker } from './trace-file-thread.ts'
import { type BodyLedger, checkHeader, digestMismatch, Validator } from './trace-file-validator.ts'
import { bodyRefs } from './trace-reader.ts'

/**
 * The file is read this much at a time. The scanner parses every exchange a piece completes before the first is
 * taken, and those wait through the awaits of the ones before them: with 1 MiB pieces (about a thousand small
 * exchanges) they outlived the young generation, were promoted and died in full collections (the reading thread's
 * GC 2.5-3.2 s of a 200,000-exchange import; 1.6-1.7 s with 64 KiB, 225-230 MB peak against 240-244; a million
 * exchanges in 59-71 s at 294-303 MB against 71-76 s at 308-317 MB, alternated). 256 KiB was as slow as 1 MiB.
 */
const READ_CHUNK = 64 * 1024
/**
 * The bodies kept for refs (TraceFileReadOptions.cacheBytes): a body referred to again is taken from here,
 * else read again from the exchange that held it. 32 MiB held 20 MB more of a million-exchange import's peak.
 */
const REF_CACHE_BYTES = 8 * 1024 * 1024
const FIELDS = ['format', 'version', 'digest', 'meta', 'exchanges']

/** A trace file opened for streamed, verified reading. */
export class TraceFileReader {
  readonly path: string
  readonly meta: TraceMeta
  /** The digest the file records (checked against its content once every exchange was read). */
  readonly digest: string
  readonly #v: Validator
  readonly #events: AsyncGenerator<JsonStreamEvent>
  readonly #options: TraceFileReadOptions
  /** Whether exchanges() reads the file in a worker thread (`workerFrom`). */
  readonly inWorker: boolean

  private constructor(
    path: string,
    v: Validator,
    header: { digest: string; meta: TraceMeta },
    events: AsyncGenerator<JsonStreamEvent>,
    options: TraceFileReadOptions,
    inWorker: boolean,
  ) {
    this.path = path
    this.inWorker = inWorker
    this.#v = v
    this.meta = header.meta
    this.digest = header.digest
    this.#events = events
    this.#options = options
  }

  /** Opens `path` and reads it up to its exchanges; the fields before them (format, version, digest, meta) are checked. */
  static async open(path: string, options: TraceFileReadOptions = {}): Promise<TraceFileReader> {
    const v = new Validator(path)
    const events = scan(path, v)
    const top: Record<string, unknown> = {}
    for (;;) {
      const { value: e } = await events.next()
      if (e === undefined || e.kind === 'end') break
      if (e.kind === 'array-start') {
        top.exchanges = []
        break
      }
      if (e.kind === 'field') top[e.key] = e.value
    }
    // Every field but the exchanges comes first: a streamed reader needs the meta and version before them.
    for (const k of FIELDS) if (!(k in top)) v.fail(k, k === 'exchanges' ? 'is missing' : 'is missing before "exchanges"')
    v.object(top, '', FIELDS)
    v.array(top.exchanges, 'exchanges')
    const inWorker = options.workerFrom !== undefined && (await stat(path)).size >= options.workerFrom
    return new TraceFileReader(path, v, checkHeader(v, top), events, options, inWorker)
  }

  /**
   * Every exchange, checked, in file order. After the last one the rest of the file is read and the trace
   * digest compared: a mismatch throws TR_TRACE_DIGEST_MISMATCH there, so a caller that stages exchanges
   * commits only once this loop ended without throwing.
   */
  async *exchanges(): AsyncGenerator<TraceFileExchange> {
    if (this.inWorker) {
      // The worker reads the file from its start: this thread's read of the header ends here.
      await this.#events.return(undefined)
      yield* exchangesInWorker(this.path, this, this.#options)
      return
    }
    const v = this.#v
    const ledger = new StreamLedger(this.path, this.#options.cacheBytes ?? REF_CACHE_BYTES)
    const digester = new TraceDigester()
    const seqs = new SeqsSeen()
    // A problem found by trace/validate.ts waits for the digest: an edited file says so first, as parseTraceFile does.
    let problem: (() => never) | undefined
    try {
      for await (const e of this.#events) {
        if (e.kind === 'field') v.fail(e.key, FIELDS.includes(e.key) ? 'appears twice' : 'is not a known field')
        if (e.kind !== 'element') continue
        const path = `exchanges[${digester.count}]`
        ledger.begin(e.offset, e.length)
        const x = v.exchange(e.value, path, ledger)
        await ledger.settle(v)
        const canonical = digester.add(x)
        if (problem) continue
        const found = exchangeProblem(x, ledger.current)
        if (found) problem = () => v.fail(`${path}.${found.path}`, found.problem)
        else if (!seqs.add(x.seq)) problem = () => v.fail(`${path}.seq`, `repeats seq ${x.seq}; every exchange of a trace has its own`)
        if (problem) continue
        if (this.#options.refBytes) await ledger.refBytes(x, v)
        yield { exchange: x, bodies: ledger.current, canonical }
      }
    } finally {
      await ledger.close()
    }
    const actual = digester.digest(this.meta)
    if (actual !== this.digest) throw digestMismatch(this.path, this.digest, actual)
    problem?.()
  }
}

/**
 * The seqs read so far, to refuse a repeat: runs of consecutive seqs while they rise (a file's usual order, so
 * a million exchanges numbered 0.. hold one run, not a Set of a million numbers), a Set from the first seq that
 * is below one already read.
 */
class SeqsSeen {
  readonly #starts: number[] = []
  readonly #ends: number[] = []
  #set: Set<number> | undefined

  /** Notes `seq`; false when it was read before. */
  add(seq: number): boolean {
    if (this.#set) {
      if (this.#set.has(seq)) return false
      this.#set.add(seq)
      return true
    }
    const last = this.#ends.length - 1
    const end = this.#ends[last]
    if (end === undefined || seq > end) {
      if (end !== undefined && seq === end + 1) this.#ends[last] = seq
      else {
        this.#starts.push(seq)
        this.#ends.push(seq)
      }
      return true
    }
    // Below the last one: inside a run is a repeat; otherwise seqs no longer rise, and a Set takes over.
    let lo = 0
    let hi = last
    while (lo < hi) {
      const mid = (lo + hi) >>> 1
      if ((this.#ends[mid] as number) < seq) lo = mid + 1
      else hi = mid
    }
    if ((this.#starts[lo] as number) <= seq) return false
    this.#set = new Set([seq])
    for (const [i, start] of this.#starts.entries()) for (let n = start; n <= (this.#ends[i] as number); n++) this.#set.add(n)
    return true
  }
}

/**
 * What a cached body costs: its bytes, and the objects around them (the typed array, its buffer, the map
 * entry and digest string: about 400 bytes). Counting bytes alone let a cache of 32 MiB of 60-byte bodies hold
 * half a million of them, some 200 MB.
 */
function cacheCost(bytes: Uint8Array): number {
  return bytes.byteLength + 400
}

/** The file's JSON events; a syntax error is TR_TRACE_FILE_INVALID naming the file and the byte. */
async function* scan(path: string, v: Validator): AsyncGenerator<JsonStreamEvent> {
  // Plain JSON.parse for exchanges: every number in one must be a double anyway (the validator insists), and
  // parseJson's reviver would cost more than the rest of reading the file.
  const parser = new JsonObjectStream('exchanges', JSON.parse)
  try {
    for await (const chunk of createReadStream(path, { highWaterMark: READ_CHUNK })) yield* parser.push(chunk as Buffer)
    yield* parser.end()
  } catch (err) {
    if (err instanceof JsonStreamError) v.fail('(top level)', `is not valid JSON (${err.message})`)
    if (err instanceof ToolReplayError) throw err
    throw new ToolReplayError(ErrorCodes.TRACE_FILE_INVALID, `Failed to read trace file ${path}: ${(err as Error).message}. Check the path.`, { cause: err })
  }
}

/**
 * The bodies of a streamed file: the size of each distinct body and the exchange that holds its bytes, the
 * bytes of the current exchange's bodies, blobs to read after the exchange, and a cache of recent bytes.
 */
class StreamLedger implements BodyLedger {
  readonly #path: string
  readonly #cacheLimit: number
  // digest -> [size, offset's low 32 bits, its high bits, length] of each distinct body, in typed arrays
  // (digest-index.ts keeps 32-bit numbers; the offset in two, so a file past 4 GiB needs no Map beside).
  readonly #index = new DigestIndex(4)
  readonly #cache = new Map<string, Uint8Array>()
  #cached = 0
  #pending: Array<{ digest: string; size: number; path: string }> = []
  #offset = 0
  #length = 0
  #fd: FileHandle | undefined
  current = new Map<string, Uint8Array>()

  constructor(path: string, cacheBytes: number) {
    this.#path = path
    this.#cacheLimit = cacheBytes
  }

  begin(offset: number, length: number): void {
    this.current = new Map()
    this.#pending = []
    this.#offset = offset
    this.#length = length
  }

  blob(digest: string, size: number, path: string): 'later' {
    if (!this.#index.has(digest)) this.#note(digest, size)
    this.#pending.push({ digest, size, path })
    return 'later'
  }

  earlier(digest: string): number | undefined {
    return this.#index.get(digest, 0)
  }

  add(digest: string, bytes: Uint8Array): void {
    if (!this.#index.has(digest)) this.#note(digest, bytes.byteLength)
    this.current.set(digest, bytes)
    this.#remember(digest, bytes)
  }

  /** Reads and checks the blobs the exchange named. */
  async settle(v: Validator): Promise<void> {
    for (const { digest, size, path } of this.#pending) {
      if (this.current.has(digest)) continue
      const bytes = await this.#blob(digest)
      if (bytes === undefined) v.fail(`${path}.blob`, `names blobs/${digest}, which is missing beside the trace file; copy the blobs/ folder along with it`)
      v.checkBytes(bytes, path, digest, size)
      this.current.set(digest, bytes)
    }
    this.#pending = []
  }

  /** Adds the bytes of the bodies `x` refers to earlier ones: from the cache, else read again from the file. */
  async refBytes(x: Exchange, v: Validator): Promise<void> {
    for (const [ref] of bodyRefs(x)) {
      if (this.current.has(ref.digest)) continue
      const cached = this.#cache.get(ref.digest)
      // Most recently used last: a body referred to again and again stays while one-off bodies pass through.
      if (cached !== undefined) {
        this.#cache.delete(ref.digest)
        this.#cached -= cacheCost(cached)
      }
      const bytes = cached ?? (await this.#reread(ref.digest, v))
      this.#remember(ref.digest, bytes)
      this.current.set(ref.digest, bytes)
    }
  }

  async close(): Promise<void> {
    await this.#fd?.close()
    this.#fd = undefined
  }

  #note(digest: string, size: number): void {
    this.#index.add(digest, size, this.#offset % 2 ** 32, Math.floor(this.#offset / 2 ** 32), this.#length)
  }

  #remember(digest: string, bytes: Uint8Array): void {
    if (bytes.byteLength > this.#cacheLimit / 4 || this.#cache.has(digest)) return
    this.#cache.set(digest, bytes)
    this.#cached += cacheCost(bytes)
    if (this.#cached <= this.#cacheLimit) return
    // Down to 3/4 in one pass, the oldest first. Not one entry per insert: each pass starts a new iterator,
    // which walks over every entry deleted since the map last compacted itself, and one pass per insert made a
    // million-exchange import spend 228 of its 418 s here.
    for (const [d, b] of this.#cache) {
      if (this.#cached <= (this.#cacheLimit * 3) / 4) break
      this.#cache.delete(d)
      this.#cached -= cacheCost(b)
    }
  }

  async #blob(digest: string): Promise<Uint8Array | undefined> {
    const bytes = await readFile(join(dirname(this.#path), 'blobs', digest)).catch(() => undefined)
    return bytes && new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  }

  /** A body's bytes read again from the exchange that first held them (already checked once; checked again). */
  async #reread(digest: string, v: Validator): Promise<Uint8Array> {
    const [size, low, high, length] = [0, 1, 2, 3].map((c) => this.#index.get(digest, c)) as number[]
    const offset = (low as number) + (high as number) * 2 ** 32
    this.#fd ??= await open(this.#path, 'r')
    const text = Buffer.alloc(length as number)
    await this.#fd.read(text, 0, length as number, offset)
    const found = new Map<string, Uint8Array>()
    const blobs: string[] = []
    const ledger: BodyLedger = {
      blob: (d) => {
        blobs.push(d)
        return 'later'
      },
      earlier: (d) => this.earlier(d),
      add: (d, b) => found.set(d, b),
    }
    const at = `exchange at byte ${offset}`
    new Validator(this.#path).exchange(parseJson(text.toString('utf8')), at, ledger)
    const bytes = found.get(digest) ?? (blobs.includes(digest) ? await this.#blob(digest) : undefined)
    if (bytes === undefined) v.fail(at, `no longer holds body ${digest}; the file changed while it was read`)
    v.checkBytes(bytes, at, digest, size as number)
    return bytes
  }
}
