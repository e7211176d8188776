/**
 * How the timeline nests and groups rows, from the rows alone: an HTTP exchange that follows a model turn
 * which asked for tool calls (with no model turn between) answers those calls and sits under it; a request
 * that repeats the previous one (same method and URL) after it failed, or that the SDK marked as a retry, is
 * a retry of it and shows its attempt number.
 */

/** What grouping reads of a row. */
export interface GroupableRow {
  seq: number
  method: string
  url: string
  status?: number
  error?: unknown
  attempt?: number
  llm?: { toolCalls: unknown[] }
}

/** How one row is shown. */
export interface RowGroup {
  /** The model turn whose tool calls this exchange answers. */
  parent?: number
  /** 1 for a first try; 2, 3, ... for retries. */
  attempt: number
}

const failed = (r: GroupableRow) => r.error !== undefined || (r.status !== undefined && (r.status === 408 || r.status === 429 || r.status >= 500))

/** Groups for consecutive rows (`rows` in seq order; a gap resets the context). */
export function groupRows(rows: ReadonlyArray<GroupableRow | undefined>): RowGroup[] {
  const out: RowGroup[] = []
  let parent: number | undefined
  let previous: GroupableRow | undefined
  let attempt = 1
  for (const r of rows) {
    if (!r) {
      out.push({ attempt: 1 })
      parent = undefined
      previous = undefined
      attempt = 1
      continue
    }
    const again = previous !== undefined && previous.method === r.method && previous.url === r.url && (failed(previous) || (r.attempt ?? 0) > 0)
    attempt = again ? attempt + 1 : r.attempt !== undefined && r.attempt > 0 ? r.attempt + 1 : 1
    if (r.llm) {
      out.push({ attempt })
      parent = r.llm.toolCalls.length > 0 ? r.seq : undefined
    } else out.push(parent !== undefined ? { parent, attempt } : { attempt })
    previous = r
  }
  return out
}
