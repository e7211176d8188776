/** What an LLM patch changes, resolved to concrete places in a JSON body or in the events of a stream. */
import type { JsonEdit } from '../json-codec.ts'
import type { SegmentEdit } from './sse-segments.ts'

/** The meaning-level thing an `llm.*` patch replaces. */
export type LlmPatchTarget = { field: 'output_text' } | { field: 'finish' } | { field: 'tool_call'; index: number; part: 'name' | 'arguments' }

/** A patch target with its value resolved for one API: text for text, name and arguments; the wire finish. */
export type LlmEdit =
  | { field: 'output_text'; text: string }
  | { field: 'finish'; finish: string; detail?: string }
  | { field: 'tool_call'; index: number; wireIndex: number; part: 'name'; name: string }
  | { field: 'tool_call'; index: number; wireIndex: number; part: 'arguments'; text: string; value: unknown }

/** One event of a stream being patched: its segment position, type and parsed data. */
export interface StreamEvent {
  seg: number
  type: string
  data: Record<string, unknown>
}

/** A reason a patch cannot be applied to this body, for the TR_INVALID_PATCH message. */
export class PlanError extends Error {}

/** Collects edits per stream event. */
export class StreamPlan {
  readonly edits = new Map<number, SegmentEdit>()

  set(seg: number, path: Array<string | number>, value: unknown): void {
    this.#of(seg).edits.push({ path, value })
  }

  rename(seg: number, event: string): void {
    this.#of(seg).event = event
  }

  get size(): number {
    return this.edits.size
  }

  #of(seg: number): SegmentEdit {
    let e = this.edits.get(seg)
    if (!e) {
      e = { edits: [] }
      this.edits.set(seg, e)
    }
    return e
  }
}

/** Edits for a JSON body. */
export type JsonPlan = JsonEdit[]
