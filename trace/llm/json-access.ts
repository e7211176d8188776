/**
 * Defensive readers for provider JSON whose shape is not guaranteed: every reader returns undefined
 * (never throws) when the value is not what it expects, so an unknown shape degrades to the HTTP view.
 */
import { isExactNumber } from '../json-codec.ts'

/** A plain JSON object, or undefined. */
export function obj(v: unknown): Record<string, unknown> | undefined {
  return v !== null && typeof v === 'object' && !Array.isArray(v) && !isExactNumber(v) ? (v as Record<string, unknown>) : undefined
}

/** An array, or an empty one. */
export function arr(v: unknown): unknown[] {
  return Array.isArray(v) ? v : []
}

/** A string, or undefined. */
export function str(v: unknown): string | undefined {
  return typeof v === 'string' ? v : undefined
}

/** A JSON number (plain or exact) as a finite number, or undefined. */
export function num(v: unknown): number | undefined {
  if (typeof v === 'number') return Number.isFinite(v) ? v : undefined
  if (isExactNumber(v)) {
    const n = Number(v.rawJSON)
    return Number.isFinite(n) ? n : undefined
  }
  return undefined
}

/** A non-negative integer index (a JSON number), or undefined. */
export function index(v: unknown): number | undefined {
  const n = num(v)
  return n !== undefined && Number.isSafeInteger(n) && n >= 0 ? n : undefined
}
