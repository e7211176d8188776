/**
 * A set of SHA-256 digests (64 lowercase hex characters), each with a fixed number of numbers beside it, held
 * in typed arrays: 16 bytes of digest, 4 per number and 4 to 8 of table per entry (about 36 bytes with three
 * numbers), where a Map from the hex string costs about 150 and puts a million strings on the heap. What a
 * trace file's reader and writer keep per distinct body, so a file of a million bodies stays well inside the
 * memory a streamed import or export is allowed.
 *
 * A digest is known by its first 128 bits: two digests of different contents share them with a probability of
 * about n^2 / 2^129 (1e-27 for a million bodies), and neither user takes an entry for bytes: the reader checks
 * every body's bytes against its whole digest, and a file the writer got wrong is refused by that check.
 * Numbers are kept as 32-bit unsigned words; any other number (bigger, negative, fractional) sits in a Map
 * beside, so every number works, only slower.
 *
 * Entries are dense (in insertion order); an open-addressing table of entry numbers finds them by the
 * digest's first 32 bits (uniform already: it is a hash). A key that is not a hex SHA-256 lives in a small
 * Map beside, so any string works, only slower.
 */

const EMPTY = -1
const MIN_TABLE = 1024
/** Entries per page once the first page is full: pages are added, never copied, so growing costs no second copy. */
const PAGE_BITS = 16
const PAGE = 1 << PAGE_BITS
const FIRST_PAGE = 256
/** The words (of 32 bits) of a digest the index keeps. */
const KEY_WORDS = 4
/** A number's word when the number itself is in #bigNumbers. */
const BIG = 0xffffffff

/** Digests with `width` numbers each. */
export class DigestIndex {
  readonly #width: number
  /**
   * Entries in pages of PAGE (the first grows by doubling up to PAGE, so a small index stays small): KEY_WORDS
   * words of digest and `width` numbers each. Doubling one array instead held up to twice the entries' room, and both
   * arrays at once while it copied: for a million bodies, about 180 MB where the entries need 70.
   */
  readonly #digests: Uint32Array[] = [new Uint32Array(KEY_WORDS * FIRST_PAGE)]
  readonly #values: Uint32Array[]
  /** Numbers that are not 32-bit unsigned integers, by entry * width + column. */
  readonly #bigNumbers = new Map<number, number>()
  #capacity = FIRST_PAGE
  #table = new Int32Array(MIN_TABLE).fill(EMPTY)
  #size = 0
  /** Keys that are not hex SHA-256 digests (none in a valid trace), with their numbers. */
  readonly #other = new Map<string, number[]>()
  /** The digest being looked up, parsed once per call. */
  readonly #probe = new Uint32Array(8)

  constructor(width: number) {
    this.#width = width
    this.#values = [new Uint32Array(width * FIRST_PAGE)]
  }

  get size(): number {
    return this.#size + this.#other.size
  }

  /** Bytes held by the typed arrays (entries and table). */
  get bytes(): number {
    let n = this.#table.byteLength
    for (const d of this.#digests) n += d.byteLength
    for (const v of this.#values) n += v.byteLength
    return n
  }

  has(digest: string): boolean {
    return parseDigest(digest, this.#probe) ? this.#find() !== EMPTY : this.#other.has(digest)
  }

  /** Number `column` of `digest`'s entry; undefined when it has none. */
  get(digest: string, column = 0): number | undefined {
    if (!parseDigest(digest, this.#probe)) return this.#other.get(digest)?.[column]
    const at = this.#find()
    if (at === EMPTY) return undefined
    const word = (this.#values[at >>> PAGE_BITS] as Uint32Array)[(at & (PAGE - 1)) * this.#width + column] as number
    return word === BIG ? this.#bigNumbers.get(at * this.#width + column) : word
  }

  /** Adds `digest` with `values` (one per column); a digest already there keeps its first values. Returns true when added. */
  add(digest: string, ...values: number[]): boolean {
    if (!parseDigest(digest, this.#probe)) {
      if (this.#other.has(digest)) return false
      this.#other.set(digest, values)
      return true
    }
    if (this.#find() !== EMPTY) return false
    this.#grow()
    const entry = this.#size++
    const [page, at] = [entry >>> PAGE_BITS, entry & (PAGE - 1)]
    ;(this.#digests[page] as Uint32Array).set(this.#probe.subarray(0, KEY_WORDS), at * KEY_WORDS)
    this.#place(entry, this.#probe[0] as number)
    const row = this.#values[page] as Uint32Array
    for (let c = 0; c < this.#width; c++) {
      const value = values[c] ?? 0
      const small = value >>> 0 === value && value !== BIG
      row[at * this.#width + c] = small ? value : BIG
      if (!small) this.#bigNumbers.set(entry * this.#width + c, value)
    }
    return true
  }

  /** The entry number of the digest in #probe, or EMPTY. */
  #find(): number {
    const mask = this.#table.length - 1
    for (let slot = (this.#probe[0] as number) & mask; ; slot = (slot + 1) & mask) {
      const entry = this.#table[slot] as number
      if (entry === EMPTY) return EMPTY
      if (this.#same(entry)) return entry
    }
  }

  #same(entry: number): boolean {
    const page = this.#digests[entry >>> PAGE_BITS] as Uint32Array
    const base = (entry & (PAGE - 1)) * KEY_WORDS
    for (let i = 0; i < KEY_WORDS; i++) if (page[base + i] !== this.#probe[i]) return false
    return true
  }

  #place(entry: number, first: number): void {
    const mask = this.#table.length - 1
    let slot = first & mask
    while (this.#table[slot] !== EMPTY) slot = (slot + 1) & mask
    this.#table[slot] = entry
  }

  /** Room for one more digest: a page for it, the table at most 3/4 full. */
  #grow(): void {
    if (this.#size === this.#capacity) {
      if (this.#capacity < PAGE) {
        // The first page, doubled (copied) up to a whole page.
        const digests = new Uint32Array(this.#capacity * 2 * KEY_WORDS)
        digests.set(this.#digests[0] as Uint32Array)
        const values = new Uint32Array(this.#capacity * 2 * this.#width)
        values.set(this.#values[0] as Uint32Array)
        this.#digests[0] = digests
        this.#values[0] = values
        this.#capacity *= 2
      } else {
        this.#digests.push(new Uint32Array(PAGE * KEY_WORDS))
        this.#values.push(new Uint32Array(PAGE * this.#width))
        this.#capacity += PAGE
      }
    }
    if ((this.#size + 1) * 4 <= this.#table.length * 3) return
    this.#table = new Int32Array(this.#table.length * 2).fill(EMPTY)
    for (let e = 0; e < this.#size; e++) this.#place(e, (this.#digests[e >>> PAGE_BITS] as Uint32Array)[(e & (PAGE - 1)) * KEY_WORDS] as number)
  }
}

/** Parses 64 lowercase hex characters into 8 words; false for anything else. */
function parseDigest(hex: string, into: Uint32Array): boolean {
  if (hex.length !== 64) return false
  for (let w = 0; w < 8; w++) {
    let word = 0
    for (let i = w * 8; i < w * 8 + 8; i++) {
      const c = hex.charCodeAt(i)
      const n = c >= 48 && c <= 57 ? c - 48 : c >= 97 && c <= 102 ? c - 87 : -1
      if (n < 0) return false
      word = (word << 4) | n
    }
    into[w] = word >>> 0
  }
  return true
}
