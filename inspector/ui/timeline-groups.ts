/**
 * How the timeline groups rows: an exchange that answers a model turn's tool call sits under it (the server
 * decides which, from what the exchanges say: inspector/tool-nesting.ts); a request that repeats the previous
 * one (same method and URL) after it failed, or that the SDK marked as a retry, is a retry of it and shows its
 * attempt number.
 */

/** What grouping reads of a row. */
export interface GroupableRow {
  seq: number
  method: string
  url: string
  status?: number
  error?: unknown
  attempt?: number
}

/** How one row is shown. */
export interface RowGroup {
  /** The model turn whose tool call this exchange answers, and the call. */
  parent?: number
  call?: string
  /** 1 for a first try; 2, 3, ... for retries. */
  attempt: number
}

const failed = (r: GroupableRow) => r.error !== undefined || (r.status !== undefined && (r.status === 408 || r.status === 429 || r.status >= 500))

/**
 * Groups for consecutive rows (`rows` in seq order; a gap resets the retry context), with the tool-call
 * parents the server found (seq → parent and call).
 */
export function groupRows(
  rows: ReadonlyArray<GroupableRow | undefined>,
  parents: ReadonlyMap<number, { parent: number; call: string }> = new Map(),
): RowGroup[] {
  const out: RowGroup[] = []
  let previous: GroupableRow | undefined
  let attempt = 1
  for (const r of rows) {
    if (!r) {
      out.push({ attempt: 1 })
      previous = undefined
      attempt = 1
      continue
    }
    const again = previous !== undefined && previous.method === r.method && previous.url === r.url && (failed(previous) || (r.attempt ?? 0) > 0)
    attempt = again ? attempt + 1 : r.attempt !== undefined && r.attempt > 0 ? r.attempt + 1 : 1
    const p = parents.get(r.seq)
    out.push(p ? { parent: p.parent, call: p.call, attempt } : { attempt })
    previous = r
  }
  return out
}
