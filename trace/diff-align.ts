/**
 * How diffTraces pairs two traces' exchanges (see trace/diff.ts): identity + occurrence first, then method + URL
 * inside the gaps between in-order anchors when unambiguous; rows in observation order.
 */

import type { AlignedPair } from './diff-types.ts'

/** Keys and method + URL of one trace's exchanges, in order. */
export interface AlignSide {
  ids: string[]
  mu: string[]
}

/** The rows of a diff in observation order, and the B indexes of pairs that moved (identity pairs out of order). */
export function alignExchanges(A: AlignSide, B: AlignSide): { rows: AlignedPair[]; movedB: Set<number> } {
  const na = A.ids.length
  const nb = B.ids.length
  // Pass 1: identity + occurrence.
  const aMatch = new Array<number | undefined>(na).fill(undefined)
  const bMatch = new Array<number | undefined>(nb).fill(undefined)
  const byKey = new Map<string, number[]>()
  occurrences(B.ids).forEach((k, j) => {
    byKey.set(k, [j])
  })
  occurrences(A.ids).forEach((k, i) => {
    const j = byKey.get(k)?.[0]
    if (j !== undefined) {
      aMatch[i] = j
      bMatch[j] = i
    }
  })
  // The longest run of identity pairs in the same order anchors everything; the rest moved.
  const identityPairs: Array<[number, number]> = []
  aMatch.forEach((j, i) => {
    if (j !== undefined) identityPairs.push([i, j])
  })
  const anchors = longestIncreasing(identityPairs)
  const anchorSet = new Set(anchors.map(([i]) => i))
  // Moved pairs stay paired (never reported as missing + added) but do not anchor gaps.
  const moved = identityPairs.filter(([i]) => !anchorSet.has(i))
  const by = new Map<number, 'identity' | 'method-url'>()
  for (const [i] of identityPairs) by.set(i, 'identity')

  // Pass 2: method + URL inside each gap between anchors, only when unambiguous.
  const gaps = gapsOf(anchors, na, nb)
  for (const g of gaps) {
    const groupsA = new Map<string, number[]>()
    const groupsB = new Map<string, number[]>()
    for (let i = g.a0; i < g.a1; i++) if (aMatch[i] === undefined) push(groupsA, A.mu[i] as string, i)
    for (let j = g.b0; j < g.b1; j++) if (bMatch[j] === undefined) push(groupsB, B.mu[j] as string, j)
    for (const [key, is] of groupsA) {
      const js = groupsB.get(key)
      if (!js || js.length !== is.length) continue
      is.forEach((i, n) => {
        const j = js[n] as number
        aMatch[i] = j
        bMatch[j] = i
        by.set(i, 'method-url')
      })
    }
  }

  // Rows in observation order: each gap's missing A, then its added/moved B, then the anchor that closes it.
  const rows: AlignedPair[] = []
  const movedB = new Set(moved.map(([, j]) => j))
  for (const g of gaps) {
    for (let i = g.a0; i < g.a1; i++) {
      const j = aMatch[i]
      if (j === undefined) rows.push({ a: i })
    }
    // B order inside a gap: pass-2 pairs, added exchanges and moved pairs where B saw them.
    for (let j = g.b0; j < g.b1; j++) {
      const i = bMatch[j]
      if (i === undefined) rows.push({ b: j })
      else if (!anchorSet.has(i)) rows.push({ a: i, b: j, by: by.get(i) as 'identity' | 'method-url' })
    }
    if (g.anchor) rows.push({ a: g.anchor[0], b: g.anchor[1], by: 'identity' })
  }

  return { rows, movedB }
}

/** Keys suffixed with their occurrence: "k#0", "k#1", ... */
function occurrences(keys: string[]): string[] {
  const n = new Map<string, number>()
  return keys.map((k) => {
    const i = n.get(k) ?? 0
    n.set(k, i + 1)
    return `${k}#${i}`
  })
}

function push(m: Map<string, number[]>, k: string, v: number): void {
  const list = m.get(k)
  if (list) list.push(v)
  else m.set(k, [v])
}

/** Longest subsequence of pairs (sorted by A index) whose B indexes increase; ties keep the earliest. */
function longestIncreasing(pairs: Array<[number, number]>): Array<[number, number]> {
  const tails: number[] = []
  const prev = new Array<number>(pairs.length).fill(-1)
  for (let k = 0; k < pairs.length; k++) {
    const bj = (pairs[k] as [number, number])[1]
    let lo = 0
    let hi = tails.length
    while (lo < hi) {
      const mid = (lo + hi) >> 1
      if ((pairs[tails[mid] as number] as [number, number])[1] < bj) lo = mid + 1
      else hi = mid
    }
    if (lo > 0) prev[k] = tails[lo - 1] as number
    tails[lo] = k
  }
  const out: Array<[number, number]> = []
  let k = tails.length > 0 ? (tails[tails.length - 1] as number) : -1
  while (k !== -1) {
    out.push(pairs[k] as [number, number])
    k = prev[k] as number
  }
  return out.reverse()
}

interface Gap {
  a0: number
  a1: number
  b0: number
  b1: number
  /** The anchor pair that closes this gap; none for the tail. */
  anchor?: [number, number]
}

function gapsOf(anchors: Array<[number, number]>, na: number, nb: number): Gap[] {
  const out: Gap[] = []
  let a0 = 0
  let b0 = 0
  for (const [i, j] of anchors) {
    out.push({ a0, a1: i, b0, b1: j, anchor: [i, j] })
    a0 = i + 1
    b0 = j + 1
  }
  out.push({ a0, a1: na, b0, b1: nb })
  return out
}
